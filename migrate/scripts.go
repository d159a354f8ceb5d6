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

	prepareScript = redis.NewScript(prepareLua)
	applyScript   = redis.NewScript(applyLua)
	probeScript   = redis.NewScript(probeLua)
	cleanupScript = redis.NewScript(cleanupLua)
	createScript  = redis.NewScript(createLua)
	stepScript    = redis.NewScript(stepLua)
)
