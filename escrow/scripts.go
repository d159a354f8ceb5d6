package escrow

import (
	_ "embed"

	"github.com/celebrity-go/celebrity/internal/script"
)

// The Lua scripts, one per atomic step, each in its own file with a header (KEYS / ARGV /
// Reply / Invariant). Each touches the keys of one ledger (one hash slot), except
// witness.lua, which touches one witness chain, and mark.lua and restore.lua, which touch one
// key on the witness client.
//
// Lua has no include: the scripts that work on a ledger are built at init from step.lua,
// which names the ledger's keys and holds the shared functions (the fencing check, the log
// of steps, the field of a transfer's answer), followed by the script's own file.
var (
	//go:embed step.lua
	stepLua string
	//go:embed tail.lua
	tailLua string
	//go:embed fence.lua
	fenceLua string
	//go:embed renew.lua
	renewLua string
	//go:embed init.lua
	initLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed freeze.lua
	freezeLua string
	//go:embed accept.lua
	acceptLua string
	//go:embed refuse.lua
	refuseLua string
	//go:embed settle.lua
	settleLua string
	//go:embed snapshot.lua
	snapshotLua string
	//go:embed reconcile.lua
	reconcileLua string
	//go:embed witness.lua
	witnessLua string
	//go:embed restore.lua
	restoreLua string
	//go:embed mark.lua
	markLua string
	//go:embed activate.lua
	activateLua string
	//go:embed sweep.lua
	sweepLua string

	initScript      = script.New(stepLua + initLua)
	acquireScript   = script.New(stepLua + acquireLua)
	releaseScript   = script.New(stepLua + releaseLua)
	freezeScript    = script.New(stepLua + freezeLua)
	acceptScript    = script.New(stepLua + acceptLua)
	refuseScript    = script.New(stepLua + refuseLua)
	settleScript    = script.New(stepLua + settleLua)
	snapshotScript  = script.New(stepLua + snapshotLua)
	reconcileScript = script.New(stepLua + reconcileLua)
	witnessScript   = script.New(witnessLua)
	tailScript      = script.New(tailLua)
	fenceScript     = script.New(fenceLua)
	renewScript     = script.New(stepLua + renewLua)
	restoreScript   = script.New(restoreLua)
	markScript      = script.New(markLua)
	activateScript  = script.New(stepLua + activateLua)
	sweepScript     = script.New(stepLua + sweepLua)
)

// allScripts lists every script, for loading them on every master ahead of use.
var allScripts = []*script.Script{initScript, acquireScript, releaseScript, freezeScript, acceptScript,
	refuseScript, settleScript, snapshotScript, reconcileScript, witnessScript, tailScript,
	fenceScript, renewScript, restoreScript, markScript, activateScript, sweepScript}
