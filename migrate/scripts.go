package migrate

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed prepare.lua
	prepareLua string
	//go:embed apply.lua
	applyLua string
	//go:embed probe.lua
	probeLua string
	//go:embed cleanup.lua
	cleanupLua string
	//go:embed create.lua
	createLua string
	//go:embed step.lua
	stepLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed renew.lua
	renewLua string
	//go:embed epoch.lua
	epochLua string
	//go:embed carve.lua
	carveLua string
	//go:embed fold.lua
	foldLua string

	prepareScript = redis.NewScript(prepareLua)
	applyScript   = redis.NewScript(applyLua)
	probeScript   = redis.NewScript(probeLua)
	cleanupScript = redis.NewScript(cleanupLua)
	createScript  = redis.NewScript(createLua)
	stepScript    = redis.NewScript(stepLua)
	acquireScript = redis.NewScript(acquireLua)
	renewScript   = redis.NewScript(renewLua)
	epochScript   = redis.NewScript(epochLua)
	carveScript   = redis.NewScript(carveLua)
	foldScript    = redis.NewScript(foldLua)
)
