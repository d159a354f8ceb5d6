package replicas

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed set.lua
	setSource string
	//go:embed copy.lua
	copySource string
	//go:embed register.lua
	registerSource string
	//go:embed acquire.lua
	acquireSource string
	//go:embed release.lua
	releaseSource string
	//go:embed fleet.lua
	fleetSource string

	// setScript is the versioned set-if-newer of a primary record (see set.lua).
	setScript = redis.NewScript(setSource)
	// copyScript is the versioned set-if-newer of one copy (see copy.lua).
	copyScript = redis.NewScript(copySource)
	// registerScript registers copies and reads the primary record (see register.lua).
	registerScript = redis.NewScript(registerSource)
	// acquireScript reads the primary record or takes its lease (see acquire.lua).
	acquireScript = redis.NewScript(acquireSource)
	// releaseScript ends a lease without a value (see release.lua).
	releaseScript = redis.NewScript(releaseSource)
	// fleetScript records an instance in its fleet's roll (see fleet.lua).
	fleetScript = redis.NewScript(fleetSource)
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
