package replicas

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed set.lua
	setSource string
	//go:embed register.lua
	registerSource string
	//go:embed acquire.lua
	acquireSource string
	//go:embed release.lua
	releaseSource string

	// setScript is the versioned set-if-newer of one record (see set.lua).
	setScript = redis.NewScript(setSource)
	// registerScript registers copies and reads the logical key (see register.lua).
	registerScript = redis.NewScript(registerSource)
	// acquireScript reads the logical key or takes its lease (see acquire.lua).
	acquireScript = redis.NewScript(acquireSource)
	// releaseScript gives up a lease (see release.lua).
	releaseScript = redis.NewScript(releaseSource)
)

// Statuses of set.lua.
const (
	setApplied    = 1
	setSame       = 0
	setStale      = -1
	setSuperseded = -2
)
