package celebrity

import (
	"context"
	"time"
)

// startRefresh starts refresh-ahead (Options.RefreshAhead) on a goroutine of its own.
func (c *Cache[V]) startRefresh() {
	if c.o.RefreshAhead <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.refreshStop = cancel
	c.refreshWG.Add(1)
	go func() { defer c.refreshWG.Done(); c.refreshLoop(ctx) }()
}

// stopRefresh stops refresh-ahead and waits for it.
func (c *Cache[V]) stopRefresh() {
	if c.refreshStop != nil {
		c.refreshStop()
	}
	c.refreshWG.Wait()
}

// dropHotEntry forgets the entry last installed for key, which the fleet demoted.
func (c *Cache[V]) dropHotEntry(key string) { c.hotEntries.Delete(key) }

// refreshLoop reloads, every RefreshAhead, each hot key that was read on this instance since
// its last refresh (and each newly promoted key once), so that a hot key's L1 entry never
// leaves its fresh window while it is read. A key no longer read here is left to expire, so
// its Redis-level rate falls and the fleet can demote it.
func (c *Cache[V]) refreshLoop(ctx context.Context) {
	t := time.NewTicker(c.o.RefreshAhead)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for key := range c.loop.Members() {
			if ctx.Err() != nil {
				return
			}
			if v, ok := c.hotEntries.Load(key); ok && !v.(*entry[V]).touched.Load() {
				continue
			}
			c.refresh(ctx, key)
		}
	}
}

// refresh reads key from Redis and installs it in the L1, unless an invalidation of its stripe
// (or a MarkAllStale) happened since before the read: then the value read may be older than
// what the invalidation announced, and the next Get loads it instead.
func (c *Cache[V]) refresh(ctx context.Context, key string) {
	st, ep := c.stripe(key), c.epoch.Load()
	g := st.gen.Load()
	c.loop.Observe(key)
	c.refreshes.Add(1)
	lctx, cancel := context.WithTimeout(ctx, c.o.Fresh)
	defer cancel()
	item, err := c.rep.GetOrLoad(lctx, key, c.o.TTL, c.loadSource)
	if err != nil {
		c.failedRefresh(key)
		return
	}
	v, err := decode(c.o.Codec, key, item.Value)
	if err != nil {
		return
	}
	e := &entry[V]{v: v, version: item.Version, hot: true}
	st.mu.Lock()
	if st.gen.Load() == g && c.epoch.Load() == ep && c.loop.IsHot(key) {
		c.l1.Set(key, e)
		c.hotEntries.Store(key, e)
	}
	st.mu.Unlock()
}

// failedRefresh forgets key's last entry after a refresh failed, so that the next round tries
// again, if the key was read here since that entry was installed. A key nobody here has read
// (a newly promoted one, or one whose entry was not touched) gets an untouched placeholder
// instead: the loop tries it once, not every RefreshAhead, and a Get that loads it installs a
// real entry.
func (c *Cache[V]) failedRefresh(key string) {
	if v, ok := c.hotEntries.Load(key); ok && v.(*entry[V]).touched.Load() {
		c.hotEntries.Delete(key)
		return
	}
	c.hotEntries.Store(key, &entry[V]{hot: true})
}
