package replicas

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// GetOrLoad returns key's value like Get and, when no copy and not the logical key hold
// one, loads it from the source with load — once for the whole fleet.
//
// Callers on one instance share one fetch. The fetch takes the key's lease (a token stored
// next to the logical key, for Options.LeaseTTL) or, when another instance holds it, polls
// every Options.PollInterval until that holder's fill appears. The lease winner runs load,
// then fills the logical key and its registered copies in one script that first checks the
// lease is still its own: a filler whose lease expired and was taken over by another caller
// changes nothing, so a slow filler cannot overwrite a newer value. If the holder dies or
// its load fails, the lease expires (or is released) and one waiting caller takes over.
//
// The fetch runs detached from the callers' contexts (bounded by Options.LoadTimeout and
// Close), with the ttl and load of the caller that started it; each caller leaves when its
// own ctx ends. A load error is returned to the callers of that fetch. If the fill is refused
// because a newer version (or tombstone) is stored, the callers get the stored value, or the
// loaded one when the stored record is a tombstone.
func (r *Replicator) GetOrLoad(ctx context.Context, key string, ttl time.Duration, load Loader) (Item, error) {
	if key == "" {
		return Item{}, errEmptyKey
	}
	if load == nil {
		return Item{}, errors.New("replicas: GetOrLoad needs a loader")
	}
	ttl, err := r.checkTTL(ttl)
	if err != nil {
		return Item{}, err
	}
	it, err := r.Get(ctx, key)
	if !errors.Is(err, ErrNotFound) {
		return it, err
	}
	f, err := r.join(key, ttl, load)
	if err != nil {
		return Item{}, err
	}
	select {
	case <-f.done:
		return f.item, f.err
	case <-ctx.Done():
		return Item{}, fmt.Errorf("replicas: get or load %q: %w", key, ctx.Err())
	}
}

// flight is one shared fetch of a key on this instance.
type flight struct {
	done chan struct{}
	item Item
	err  error
}

// join returns the key's fetch in flight, starting one if there is none.
func (r *Replicator) join(key string, ttl time.Duration, load Loader) (*flight, error) {
	r.flightMu.Lock()
	defer r.flightMu.Unlock()
	if f := r.flights[key]; f != nil {
		return f, nil
	}
	if r.lifetime.Err() != nil {
		return nil, ErrClosed
	}
	f := &flight{done: make(chan struct{})}
	r.flights[key] = f
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.lifetime, r.opts.LoadTimeout)
		f.item, f.err = r.fetch(ctx, key, ttl, load)
		cancel()
		if f.err != nil && r.lifetime.Err() != nil {
			f.err = fmt.Errorf("replicas: get or load %q: %w", key, ErrClosed)
		}
		r.flightMu.Lock()
		delete(r.flights, key)
		r.flightMu.Unlock()
		close(f.done)
	}()
	return f, nil
}

// newToken returns a random lease token. It is drawn from crypto/rand, not Options.Rand:
// instances whose Rand is seeded alike must still never share a lease.
func (r *Replicator) newToken() string {
	return rand.Text()
}

// fetch takes the lease or waits for its holder, then loads and fills.
func (r *Replicator) fetch(ctx context.Context, key string, ttl time.Duration, load Loader) (Item, error) {
	token := r.newToken()
	keys := []string{key, r.leaseKey(key)}
	leaseMs := r.opts.LeaseTTL.Milliseconds()
	waited := false
	for {
		res, err := acquireScript.Run(ctx, r.client, keys, token, leaseMs).Slice()
		if err != nil {
			return Item{}, fmt.Errorf("replicas: lease for %q: %w", key, err)
		}
		state, _ := res[0].(string)
		switch state {
		case "hit":
			raw, _ := res[1].(string)
			return r.item(key, raw, nil)
		case "wait":
			if !waited {
				waited = true
				r.stats.leaseWaits.Add(1)
			}
			t := time.NewTimer(r.opts.PollInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return Item{}, fmt.Errorf("replicas: waiting for the fill of %q: %w", key, ctx.Err())
			case <-t.C:
			}
			continue
		case "won":
			r.stats.leaseWins.Add(1)
			if waited {
				r.stats.leaseTakeovers.Add(1)
			}
			return r.loadAndFill(ctx, key, token, ttl, load)
		default:
			return Item{}, fmt.Errorf("replicas: lease for %q: unexpected reply %v", key, res)
		}
	}
}

// loadAndFill runs load under the lease held with token and fills the key.
func (r *Replicator) loadAndFill(ctx context.Context, key, token string, ttl time.Duration, load Loader) (Item, error) {
	lease := r.leaseKey(key)
	markMs := r.opts.LeaseTTL.Milliseconds()
	it, err := load(ctx)
	if err != nil {
		// Let another caller take over now rather than after the lease expires.
		_ = releaseScript.Run(context.WithoutCancel(ctx), r.client, []string{lease}, token, markMs).Err()
		if errors.Is(err, ErrNotFound) {
			return Item{}, ErrNotFound
		}
		return Item{}, fmt.Errorf("replicas: loading %q: %w", key, err)
	}
	var lay *layout
	add := ""
	if r.IsHot(key) {
		if lay, _ = r.layoutFor(ctx, key); lay != nil {
			add = lay.add
		}
	}
	rec := record{version: it.Version, data: string(it.Value)}
	start := time.Now()
	res, err := setScript.Run(ctx, r.client, []string{key, lease},
		strconv.FormatUint(it.Version, 10), kindValue, rec.data, ttl.Milliseconds(), add, token, markMs).Int64Slice()
	if err != nil {
		return it, fmt.Errorf("replicas: filling %q: %w", key, err)
	}
	if len(res) == 0 {
		return it, fmt.Errorf("replicas: filling %q: empty reply", key)
	}
	switch res[0] {
	case setSuperseded, setStale:
		r.stats.fillsRefused.Add(1)
		// Someone else's newer value (if any) wins over ours.
		if raw, err := r.client.Get(ctx, key).Result(); err == nil {
			if stored, ok := decode(raw); ok && !stored.tombstone {
				return Item{Value: []byte(stored.data), Version: stored.version}, nil
			}
		}
		return it, nil
	}
	// The copies are a cache of the logical key: a failed copy is refilled by a later read.
	_ = r.writeCopies(ctx, key, rec, r.targets(key, rec, lay, res[1:], ttl, time.Since(start)), 1)
	return it, nil
}
