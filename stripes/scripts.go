package stripes

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script lives in its own file with a header comment: its keys and why they share a
// slot, its arguments, its reply and the invariant it protects.
var (
	//go:embed add.lua
	addSrc string
	//go:embed create.lua
	createSrc string
	//go:embed close.lua
	closeSrc string
	//go:embed seal.lua
	sealSrc string
	//go:embed fold.lua
	foldSrc string
	//go:embed cas.lua
	casSrc string
	//go:embed prune.lua
	pruneSrc string

	addScript    = redis.NewScript(addSrc)
	createScript = redis.NewScript(createSrc)
	closeScript  = redis.NewScript(closeSrc)
	sealScript   = redis.NewScript(sealSrc)
	foldScript   = redis.NewScript(foldSrc)
	casScript    = redis.NewScript(casSrc)
	pruneScript  = redis.NewScript(pruneSrc)
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
