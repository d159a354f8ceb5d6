package routing

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed write.lua
	writeLua string
	//go:embed get.lua
	getLua string
	//go:embed own.lua
	ownLua string
	//go:embed publish.lua
	publishLua string
	//go:embed tenantscan.lua
	tenantscanLua string
	//go:embed load.lua
	loadLua string

	writeScript      = redis.NewScript(writeLua)
	getScript        = redis.NewScript(getLua)
	ownScript        = redis.NewScript(ownLua)
	publishScript    = redis.NewScript(publishLua)
	tenantscanScript = redis.NewScript(tenantscanLua)
	loadScript       = redis.NewScript(loadLua)
)
