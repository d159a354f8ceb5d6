package ratelimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/script"
)

// Each script lives in its own file with a header comment: its keys and why they share a
// slot, its arguments, its reply and the invariant it protects.
var (
	//go:embed gcra.lua
	gcraLua string
	//go:embed take.lua
	takeLua string
	//go:embed sync.lua
	syncLua string

	gcraScript = script.New(gcraLua)
	takeScript = script.New(takeLua)
	syncScript = script.New(syncLua)
)

// Client is the part of go-redis a [Limiter] needs: running scripts.
// *redis.Client and *redis.ClusterClient satisfy it.
type Client interface {
	redis.Scripter
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = redis.UniversalClient(nil)
)
