package escrow

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one per atomic step. Each touches the keys of one ledger (one hash slot),
// except witness.lua, which touches one witness key.
var (
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

	initScript      = redis.NewScript(initSrc)
	acquireScript   = redis.NewScript(acquireSrc)
	releaseScript   = redis.NewScript(releaseSrc)
	freezeScript    = redis.NewScript(freezeSrc)
	acceptScript    = redis.NewScript(acceptSrc)
	refuseScript    = redis.NewScript(refuseSrc)
	settleScript    = redis.NewScript(settleSrc)
	snapshotScript  = redis.NewScript(snapshotSrc)
	reconcileScript = redis.NewScript(reconcileSrc)
	witnessScript   = redis.NewScript(witnessSrc)
)
