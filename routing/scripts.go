package routing

import (
	_ "embed"

	"github.com/celebrity-go/celebrity/internal/script"
)

// The Lua scripts, one per atomic step, each in its own file with a header (KEYS / ARGV /
// Reply / Invariant), run through internal/script (EVALSHA, EVAL when the server answers
// NOSCRIPT).
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

	writeScript      = script.New(writeLua)
	getScript        = script.New(getLua)
	ownScript        = script.New(ownLua)
	publishScript    = script.New(publishLua)
	tenantscanScript = script.New(tenantscanLua)
	loadScript       = script.New(loadLua)
)
