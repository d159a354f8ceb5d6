package stripes

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/script"
)

// Each script lives in its own file name.lua with a header comment (its keys and why they
// share a slot, its arguments, its reply and the invariant it protects), embedded as nameLua
// and run as nameScript through internal/script.
var (
	//go:embed add.lua
	addLua string
	//go:embed addfast.lua
	addFastLua string
	//go:embed split.lua
	splitLua string
	//go:embed create.lua
	createLua string
	//go:embed close.lua
	closeLua string
	//go:embed seal.lua
	sealLua string
	//go:embed fold.lua
	foldLua string
	//go:embed cas.lua
	casLua string
	//go:embed prune.lua
	pruneLua string
	//go:embed expiring.lua
	expiringLua string
	//go:embed home.lua
	homeLua string
	//go:embed rate.lua
	rateLua string

	addScript      = script.New(addLua)
	addFastScript  = script.New(addFastLua)
	splitScript    = script.New(splitLua)
	createScript   = script.New(createLua)
	closeScript    = script.New(closeLua)
	sealScript     = script.New(sealLua)
	foldScript     = script.New(foldLua)
	casScript      = script.New(casLua)
	pruneScript    = script.New(pruneLua)
	expiringScript = script.New(expiringLua)
	homeScript     = script.New(homeLua)
	rateScript     = script.New(rateLua)
)

// Reply codes of add.lua.
const (
	addApplied   = 1
	addDuplicate = 2
	addSealed    = 3
	addTooOld    = 4
	addTooNew    = 5
	addNext      = 6
	addNoStripe  = 7
	addWrongGen  = 8
	addOverflow  = 9
	addSplitDue  = 10 // applied, and the record's dedup set is due to split
)

// Client is the part of go-redis a [Counter] needs: scripts, hashes and pipelines.
// *redis.Client and *redis.ClusterClient satisfy it.
type Client interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = redis.UniversalClient(nil)
)

// runAll runs calls in one pipeline through script.Pipeline (on a cluster, one per master;
// a call answered NOSCRIPT is sent again with the script's source) and returns one command
// per call, in order. A Client that cannot open a pipeline (every go-redis client can) runs
// the calls one at a time instead, each with EVALSHA and an EVAL fallback.
func runAll(ctx context.Context, client Client, calls []script.Call) []*redis.Cmd {
	if pc, ok := client.(script.Client); ok {
		cmds, _ := script.Pipeline(ctx, pc, calls) // its error is always nil
		return cmds
	}
	cmds := make([]*redis.Cmd, len(calls))
	for i, call := range calls {
		cmds[i] = call.Script.Run(ctx, client, call.Keys, call.Args...)
	}
	return cmds
}
