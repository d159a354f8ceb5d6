package replicas

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// BatchLoader loads several keys from the source in one call and returns what it found, by
// key: a key it leaves out is one the source does not have (as ErrNotFound from a Loader).
// An error fails every key of the call, except a *KeyErrors, which fails only the keys it
// names (the items returned for the others are used).
type BatchLoader func(ctx context.Context, keys []string) (map[string]Item, error)

// KeyErrors is the error a BatchLoader returns when some of its keys failed and the others
// did not: the failed keys and their errors.
type KeyErrors map[string]error

// Error lists how many keys failed.
func (e KeyErrors) Error() string { return fmt.Sprintf("replicas: %d keys failed to load", len(e)) }

// GetOrLoadMany is GetOrLoad for several keys at once, with the same guarantee per key (one
// load for the whole fleet, through each key's fill lease), in fewer round trips: the keys
// that are not hot are read, or their leases taken, with one pipeline (on a cluster client,
// one round trip per master, sent in parallel), and the keys whose leases it took are loaded
// with one call of load and filled (one script per key, concurrently). A key whose lease
// another caller holds, or whose read failed, goes the way of GetOrLoad (it waits for the
// holder's fill, shares this instance's fetch of the key when there is one, and loads alone,
// with load called for that key, when it takes the lease over); so does each hot key.
//
// It returns the items found by key and, by key, the error of every key that has none (an
// error matching ErrNotFound for a key the source does not have). The error is for the call
// itself (bad arguments, Close). The shared work runs detached from ctx, bounded by
// Options.LoadTimeout and Close, like GetOrLoad's fetch; the call returns when ctx ends.
func (r *Replicator) GetOrLoadMany(ctx context.Context, keys []string, ttl time.Duration, load BatchLoader) (map[string]Item, map[string]error, error) {
	if load == nil {
		return nil, nil, fmt.Errorf("%w: GetOrLoadMany needs a loader", ErrInvalid)
	}
	ttl, err := r.checkTTL(ttl)
	if err != nil {
		return nil, nil, err
	}
	b := &batch{items: map[string]Item{}, errs: map[string]error{}}
	var cold, hot []string
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		switch {
		case seen[k]:
		case k == "":
			return nil, nil, errEmptyKey
		case r.IsHot(k):
			hot = append(hot, k)
		default:
			cold = append(cold, k)
		}
		seen[k] = true
	}
	won, rest := r.readOrLeaseMany(ctx, b, cold, ttl)
	if len(won) == 0 && len(rest) == 0 && len(hot) == 0 {
		return b.items, b.errs, nil
	}
	if r.lifetime.Err() != nil {
		return nil, nil, ErrClosed
	}
	done := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.LoadTimeout)
		defer cancel()
		stop := context.AfterFunc(r.lifetime, cancel)
		defer stop()
		var wg sync.WaitGroup
		wg.Go(func() { r.loadWon(lctx, b, won, ttl, load) })
		for _, k := range hot {
			wg.Go(func() { b.set(k)(r.GetOrLoad(lctx, k, ttl, loaderOf(load))) })
		}
		for k, pre := range rest {
			wg.Go(func() { b.set(k)(r.joinWait(lctx, k, ttl, loaderOf(load), pre)) })
		}
		wg.Wait()
	}()
	select {
	case <-done:
		return b.items, b.errs, nil
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("replicas: get or load many: %w", ctx.Err())
	}
}

// batch collects the results of a GetOrLoadMany.
type batch struct {
	mu    sync.Mutex
	items map[string]Item
	errs  map[string]error
}

// set returns a function recording key's result.
func (b *batch) set(key string) func(Item, error) {
	return func(it Item, err error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if err != nil {
			b.errs[key] = err
		} else {
			b.items[key] = it
		}
	}
}

// readOrLeaseMany sends readOrLease's command for every key in one pipeline and records the
// keys it settles in b; it returns the tokens of the leases it took (won) and, for the other
// keys, what the caller's command left for GetOrLoad's fetch (rest).
func (r *Replicator) readOrLeaseMany(ctx context.Context, b *batch, keys []string, ttl time.Duration) (won map[string]string, rest map[string]*leaseRead) {
	won, rest = map[string]string{}, map[string]*leaseRead{}
	if len(keys) == 0 {
		return won, rest
	}
	life, _ := r.leaseLife(ttl)
	tokens := make([]string, len(keys))
	cmds := make([]*redis.StatusCmd, len(keys))
	_, err := bound.Pipelined(ctx, r.client, func(p redis.Pipeliner) error {
		for i, k := range keys {
			tokens[i] = r.newToken()
			cmds[i] = p.SetArgs(ctx, r.primaryKey(k), "l2,"+tokens[i]+",0", redis.SetArgs{Mode: "NX", Get: true, TTL: life})
		}
		return nil
	})
	if err != nil && ctx.Err() != nil {
		// The caller left before the replies came (the commands may still run: a lease
		// taken then is never filled and expires, and a waiter takes it over).
		for _, k := range keys {
			b.set(k)(Item{}, err)
		}
		return won, rest
	}
	for i, k := range keys {
		it, done, pre, err := r.settleRead(cmds[i].Val(), cmds[i].Err(), tokens[i])
		switch {
		case done:
			b.set(k)(it, err)
		case pre.won:
			won[k] = pre.token
		default:
			rest[k] = pre
		}
	}
	return won, rest
}

// joinWait is GetOrLoad's fetch of key for a caller whose own command left pre.
func (r *Replicator) joinWait(ctx context.Context, key string, ttl time.Duration, load Loader, pre *leaseRead) (Item, error) {
	f, err := r.join(ctx, key, ttl, load, nil, nil, pre)
	if err != nil {
		return Item{}, err
	}
	return f.wait(ctx, key)
}

// loadWon loads the keys whose leases the batch holds (key -> token) with one call of load,
// renewing the leases meanwhile, and fills each under its lease (see won). A key whose lease
// ended before its fill goes the way of GetOrLoad, with what was loaded.
func (r *Replicator) loadWon(ctx context.Context, b *batch, won map[string]string, ttl time.Duration, load BatchLoader) {
	if len(won) == 0 {
		return
	}
	keys := make([]string, 0, len(won))
	for k, tok := range won {
		keys = append(keys, k)
		stop := r.keepLease(ctx, k, tok)
		defer stop()
	}
	slices.Sort(keys)
	items, err := callBatchLoader(ctx, keys, load)
	var ke KeyErrors
	var wg sync.WaitGroup
	for k, tok := range won {
		one := func(context.Context, string) (Item, error) {
			if it, ok := items[k]; ok {
				return it, nil
			}
			if errors.As(err, &ke) {
				if kerr, ok := ke[k]; ok {
					return Item{}, kerr
				}
				return Item{}, ErrNotFound
			}
			if err != nil {
				return Item{}, err
			}
			return Item{}, ErrNotFound
		}
		wg.Go(func() {
			it, err := r.won(ctx, k, tok, ttl, one, nil, false)
			if errors.Is(err, errLeaseLost) {
				it, err = r.joinWait(ctx, k, ttl, one, nil)
			}
			b.set(k)(it, err)
		})
	}
	wg.Wait()
}

// callBatchLoader calls load and turns a panic into an error.
func callBatchLoader(ctx context.Context, keys []string, load BatchLoader) (items map[string]Item, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("replicas: batch loader panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return load(ctx, keys)
}

// loaderOf returns a Loader through the batch loader load.
func loaderOf(load BatchLoader) Loader {
	return func(ctx context.Context, key string) (Item, error) {
		items, err := callBatchLoader(ctx, []string{key}, load)
		var ke KeyErrors
		switch {
		case errors.As(err, &ke) && ke[key] != nil:
			return Item{}, ke[key]
		case err != nil && !errors.As(err, &ke):
			return Item{}, err
		}
		if it, ok := items[key]; ok {
			return it, nil
		}
		return Item{}, ErrNotFound
	}
}
