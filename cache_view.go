package celebrity

import (
	"context"

	"github.com/celebrity-go/celebrity/replicas"
)

// replicasPrefix follows Options.Prefix in the prefix of the Cache's Replicator.
const replicasPrefix = "r:"

// Options returns the options the Cache runs with: those given to New, every default filled
// in. It is safe for concurrent use.
func (c *Cache[V]) Options() Options[V] { return c.o }

// HotSet reads the hot set of the Cache's fleet from Redis, as ReadHotSet does with the
// Cache's client and Options.Prefix: the members with the rates that decided them, the
// leader, the recent demotions. Hot is this instance's applied copy of the members, with
// no I/O.
func (c *Cache[V]) HotSet(ctx context.Context) (HotSet, error) {
	return ReadHotSet(ctx, c.client, c.o.Prefix)
}

// RecordKey returns the Redis key that holds key's record (its version and value) for the
// Caches created with Options.Prefix prefix ("" means DefaultPrefix):
// "<prefix>r:{<tag>}k:<key>", where the hash tag puts it in key's own slot. A promoted key
// is also read from copies on other slots. RecordKey does not check prefix.
func RecordKey(prefix, key string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return replicas.PrimaryKey(prefix+replicasPrefix, key)
}
