package escrow

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one per atomic step. Each touches the keys of one ledger (one hash slot),
// except witness.lua, which touches one witness chain. The scripts that advance a ledger's
// sequence start with the shared functions of step.lua.
var (
	//go:embed step.lua
	stepSrc string
	//go:embed tail.lua
	tailSrc string
	//go:embed fence.lua
	fenceSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed init.lua
	initSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed freeze.lua
	freezeSrc string
	//go:embed accept.lua
	acceptSrc string
	//go:embed refuse.lua
	refuseSrc string
	//go:embed settle.lua
	settleSrc string
	//go:embed snapshot.lua
	snapshotSrc string
	//go:embed reconcile.lua
	reconcileSrc string
	//go:embed witness.lua
	witnessSrc string
	//go:embed restore.lua
	restoreSrc string
	//go:embed mark.lua
	markSrc string
	//go:embed activate.lua
	activateSrc string

	initScript      = redis.NewScript(stepSrc + initSrc)
	acquireScript   = redis.NewScript(stepSrc + acquireSrc)
	releaseScript   = redis.NewScript(releaseSrc)
	freezeScript    = redis.NewScript(stepSrc + freezeSrc)
	acceptScript    = redis.NewScript(stepSrc + acceptSrc)
	refuseScript    = redis.NewScript(stepSrc + refuseSrc)
	settleScript    = redis.NewScript(stepSrc + settleSrc)
	snapshotScript  = redis.NewScript(snapshotSrc)
	reconcileScript = redis.NewScript(stepSrc + reconcileSrc)
	witnessScript   = redis.NewScript(witnessSrc)
	tailScript      = redis.NewScript(tailSrc)
	fenceScript     = redis.NewScript(fenceSrc)
	renewScript     = redis.NewScript(stepSrc + renewSrc)
	restoreScript   = redis.NewScript(restoreSrc)
	markScript      = redis.NewScript(markSrc)
	activateScript  = redis.NewScript(activateSrc)
)
