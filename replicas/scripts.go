package replicas

import (
	_ "embed"

	"github.com/celebrity-go/celebrity/internal/script"
)

// The Lua scripts, one per atomic step, each in its own file with a header (KEYS / ARGV /
// Reply / Invariant). Each touches the keys of one logical key (one hash slot): its primary
// record and lease keys, or one copy, or the fleet's roll.
//
// Lua has no include: the scripts that merge a registry (set.lua, register.lua, acquire.lua)
// are built from registry.lua, which holds merge(), followed by the script's own file.
var (
	//go:embed registry.lua
	registryLua string
	//go:embed set.lua
	setLua string
	//go:embed copy.lua
	copyLua string
	//go:embed register.lua
	registerLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed fleet.lua
	fleetLua string
	//go:embed renew.lua
	renewLua string

	// setScript is the versioned set-if-newer of a primary record (see set.lua).
	setScript = script.New(registryLua + setLua)
	// copyScript is the versioned set-if-newer of one copy (see copy.lua).
	copyScript = script.New(copyLua)
	// registerScript registers copies and reads the primary record (see register.lua).
	registerScript = script.New(registryLua + registerLua)
	// acquireScript reads the primary record or takes its lease (see acquire.lua).
	acquireScript = script.New(registryLua + acquireLua)
	// releaseScript ends a lease without a value (see release.lua).
	releaseScript = script.New(releaseLua)
	// renewScript keeps a lease while its holder works (see renew.lua).
	renewScript = script.New(renewLua)
	// fleetScript records an instance in its fleet's roll (see fleet.lua).
	fleetScript = script.New(fleetLua)
)

// Statuses of set.lua and copy.lua.
const (
	setApplied    = "applied"
	setSame       = "same"
	setStale      = "stale"
	setConflict   = "conflict"
	setSuperseded = "superseded"
	copyLate      = "late"
)
