package migrate

import (
	_ "embed"

	"github.com/celebrity-go/celebrity/internal/script"
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
	//go:embed holders.lua
	holdersLua string

	prepareScript = script.New(prepareLua)
	applyScript   = script.New(applyLua)
	probeScript   = script.New(probeLua)
	cleanupScript = script.New(cleanupLua)
	createScript  = script.New(createLua)
	stepScript    = script.New(stepLua)
	acquireScript = script.New(acquireLua)
	renewScript   = script.New(renewLua)
	epochScript   = script.New(epochLua)
	carveScript   = script.New(carveLua)
	foldScript    = script.New(foldLua)
	holdersScript = script.New(holdersLua)
)
