package admin

import (
	"context"

	"github.com/celebrity-go/celebrity"
)

// CacheView is what the section of Cache serves.
type CacheView struct {
	// Prefix is the Cache's Options.Prefix: every key of its fleet starts with it.
	Prefix string
	// Hot are the members of the hot set this instance applied (Cache.Hot).
	Hot []string
	// HotSet is the hot set as the fleet published it in Redis (Cache.HotSet), with the
	// rate that decided each member; HotSetError why it could not be read.
	HotSet      *celebrity.HotSet
	HotSetError error `json:"hot_set_error,omitempty"`
	// Options are the options the Cache runs with, defaults filled in, in Shape's shape;
	// the host's functions and values (Codec, Logger, hooks) are left out.
	Options any
	// Stats are the Cache's counters (Cache.Stats).
	Stats celebrity.Stats
}

// Cache returns the section of a celebrity.Cache: its prefix, the hot set this instance
// applied and the one the fleet published (read from Redis with the request's deadline),
// its effective options and its stats. A failed read of the hot set is reported in the
// section's hot_set_error; the rest is still served.
func Cache[V any](c *celebrity.Cache[V]) Section {
	return func(ctx context.Context) (any, error) {
		o := c.Options()
		opts := Shape(o).(*object)
		opts.remove("codec", "logger")
		v := CacheView{Prefix: o.Prefix, Hot: c.Hot(), Options: opts, Stats: c.Stats()}
		if hs, err := c.HotSet(ctx); err != nil {
			v.HotSetError = err
		} else {
			v.HotSet = &hs
		}
		return v, nil
	}
}
