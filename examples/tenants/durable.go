package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

const (
	durableFat     = "merchant-7"
	durableSeed    = 2000             // merchant 7's records before it moves
	durableWriters = 2                // writers per tenant
	durablePace    = time.Millisecond // pause between one writer's writes
)

// ledger is the acknowledged history of the durable tenants: per tenant and key, the last
// acknowledged write (each key has one writer, so "last" is well defined).
type ledger struct {
	mu   sync.Mutex
	last map[string]map[string]routing.Record
	acks atomic.Int64
}

func (l *ledger) ack(tenant, key string, op routing.Op, res routing.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acks.Add(1)
	if !res.Applied {
		return
	}
	if l.last[tenant] == nil {
		l.last[tenant] = map[string]routing.Record{}
	}
	rec := routing.Record{Version: res.Version, Value: op.Value}
	if op.Kind == routing.OpDelete {
		rec = routing.Record{Version: res.Version, Deleted: true}
	}
	l.last[tenant][key] = rec
}

// verify reads every acknowledged key of tenant back through r and returns how many were
// checked and the first one that differs ("" if none).
func (l *ledger) verify(ctx context.Context, r *routing.Router, tenant string) (int, string, error) {
	l.mu.Lock()
	want := make(map[string]routing.Record, len(l.last[tenant]))
	for k, v := range l.last[tenant] {
		want[k] = v
	}
	l.mu.Unlock()
	for k, w := range want {
		got, ok, err := r.Get(ctx, tenant, k)
		if err != nil {
			return 0, "", err
		}
		if !ok || got.Version != w.Version || got.Deleted != w.Deleted || (!w.Deleted && got.Value != w.Value) {
			return len(want), fmt.Sprintf("%s/%s: want %+v, read %+v (found %v)", tenant, k, w, got, ok), nil
		}
	}
	return len(want), "", nil
}

// flow writes the tenants' records through r until stop is closed: puts, and every fifth
// write a delete, each with its own operation ID, at most one per durablePace per writer.
func (l *ledger) flow(ctx context.Context, r *routing.Router, tenants []string, tag string, stop <-chan struct{}) func() error {
	var wg sync.WaitGroup
	errs := make(chan error, len(tenants)*durableWriters)
	for _, tn := range tenants {
		for w := range durableWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("w%d-k%d", w, i%50)
					op := routing.Put(key, fmt.Sprintf("%s-%d", tag, i))
					if i%5 == 4 {
						op = routing.Delete(key)
					}
					res, err := r.Do(ctx, tn, fmt.Sprintf("%s-%s-w%d-%d", tag, tn, w, i), op)
					if err != nil {
						errs <- fmt.Errorf("write of %s: %w", tn, err)
						return
					}
					l.ack(tn, key, op, res)
					time.Sleep(durablePace)
				}
			}()
		}
	}
	return func() error {
		wg.Wait()
		close(errs)
		return errors.Join(func() []error {
			var out []error
			for err := range errs {
				out = append(out, err)
			}
			return out
		}()...)
	}
}

// durable runs step 6: merchant 7 keeps durable records (versions, tombstones, idempotency
// records) in its shared hash bucket; it is carved out onto shard d and later folded back,
// with its writes and its neighbours' writes flowing throughout.
func durable(ctx context.Context, w *world, shards map[string]redis.UniversalClient, prefix, runID string, c *checker) error {
	fmt.Printf("\n6. durable records: %s is carved out of its shared bucket onto d, then folded back, writes flowing\n", durableFat)
	if w.t.Kind == redisenv.Embedded {
		fmt.Println("   not run on the embedded server: durable migrations need a real Redis 7 " +
			"(set REDIS_ADDR or REDIS_CLUSTER_ADDRS)")
		c.skip("6. durable carve-out and fold-back (needs a real Redis server)")
		c.skip("7. durable carve-out again and split over four shards (needs a real Redis server)")
		return nil
	}
	if _, err := w.r.Provision(ctx); err != nil {
		return fmt.Errorf("provision the shards: %w", err)
	}
	tbl := w.r.Table()
	b := routing.BucketOf(durableFat, tbl.Buckets)
	home := tbl.BucketOwner(b)
	var neighbours []string
	for i := 0; len(neighbours) < 2; i++ {
		if n := fmt.Sprintf("merchant-%d", 1000+i); routing.BucketOf(n, tbl.Buckets) == b {
			neighbours = append(neighbours, n)
		}
	}
	fmt.Printf("   %s lives in bucket %d on %s with %d other merchants, among them %v\n", durableFat, b, home,
		tenantCount/buckets, neighbours)
	scr := map[string]routing.ShardClient{}
	mc := map[string]migrate.ShardClient{}
	for n, s := range shards {
		scr[n], mc[n] = s, s
	}
	// The neighbours write through a router of their own, so its redirects are theirs.
	nr, err := routing.New(w.t.Client, routing.Options{Shards: scr, Prefix: prefix})
	if err != nil {
		return err
	}
	defer nr.Close()
	co, err := migrate.New(w.t.Client, migrate.Options{Shards: mc, Prefix: prefix})
	if err != nil {
		return err
	}
	l := &ledger{last: map[string]map[string]routing.Record{}}
	for i := range durableSeed {
		key := fmt.Sprintf("order-%d", i)
		op := routing.Put(key, fmt.Sprintf("total=%d", i))
		res, err := w.r.Do(ctx, durableFat, fmt.Sprintf("%s-seed-%d", runID, i), op)
		if err != nil {
			return err
		}
		l.ack(durableFat, key, op, res)
	}

	move := func(what string, do func() (migrate.Status, error)) (migrate.Status, error) {
		stop := make(chan struct{})
		waitFat := l.flow(ctx, w.r, []string{durableFat}, runID+"-"+what+"-f", stop)
		waitN := l.flow(ctx, nr, neighbours, runID+"-"+what+"-n", stop)
		before := l.acks.Load()
		st, err := do()
		during := l.acks.Load() - before
		close(stop)
		if werr := errors.Join(waitFat(), waitN()); err == nil && werr != nil {
			err = werr
		}
		if err != nil {
			return st, err
		}
		if _, err := w.r.Await(ctx, st.FlipGen); err != nil {
			return st, err
		}
		if _, err := nr.Await(ctx, st.FlipGen); err != nil {
			return st, err
		}
		fmt.Printf("   %s: %s at generation %d; %d records copied, %d change-log entries applied, "+
			"write pause %v, %d writes acknowledged meanwhile\n", what, st.State, st.FlipGen, st.Copied, st.LogApplied,
			st.Pause, during)
		return st, nil
	}
	check := func(where string) error {
		n, bad, err := l.verify(ctx, w.r, durableFat)
		if err != nil {
			return err
		}
		c.Check(bad == "", "every acknowledged write of %s (%d keys) reads back from %s %s", durableFat, n, where, bad)
		for _, nb := range neighbours {
			n, bad, err := l.verify(ctx, nr, nb)
			if err != nil {
				return err
			}
			c.Check(bad == "", "every acknowledged write of neighbour %s (%d keys) reads back from its bucket %s", nb, n, bad)
		}
		return nil
	}

	// Carve-out.
	st, err := move("carve-out", func() (migrate.Status, error) {
		return co.Carve(ctx, migrate.CarveSpec{ID: runID + "-carve", Tenant: durableFat, Target: "d"})
	})
	if err != nil {
		return err
	}
	tbl = w.r.Table()
	c.Check(st.State == migrate.OwnedB && tbl.Overrides[durableFat] == "d",
		"%s is overridden onto d (table generation %d)", durableFat, tbl.Generation)
	_, _, gerr := w.r.Shard(home).Get(ctx, routing.BucketUnit(b), tbl.Generation, durableFat, "order-0")
	c.Check(errors.Is(gerr, routing.ErrStaleRoute), "the bucket on %s refuses %s (one open owner): %v", home, durableFat, gerr)
	if err := check("d"); err != nil {
		return err
	}

	// Fold-back: a new migration at a new generation, never a flip back.
	st2, err := move("fold-back", func() (migrate.Status, error) {
		return co.Fold(ctx, migrate.FoldSpec{ID: runID + "-fold", Tenant: durableFat})
	})
	if err != nil {
		return err
	}
	tbl = w.r.Table()
	_, over := tbl.Overrides[durableFat]
	c.Check(st2.State == migrate.OwnedB && !over && st2.FlipGen > st.FlipGen,
		"%s is back in bucket %d on %s at a new generation (%d > %d)", durableFat, b, home, st2.FlipGen, st.FlipGen)
	_, _, gerr = w.r.Shard("d").Get(ctx, routing.TenantUnit(durableFat), tbl.Generation, durableFat, "order-0")
	c.Check(errors.Is(gerr, routing.ErrStaleRoute), "its unit on d refuses it (closed, kept for inspection until Cleanup): %v", gerr)
	if err := check(home); err != nil {
		return err
	}
	c.Check(nr.Stats().Redirects == 0, "the neighbours never met a stale route (%d redirects)", nr.Stats().Redirects)
	return split(ctx, w, co, c, move, check)
}

// split runs step 7: merchant 7 is carved out onto d again, then split over four shards,
// each a durable migration with its writes and its neighbours' writes flowing.
func split(ctx context.Context, w *world, co *migrate.Coordinator, c *checker,
	move func(string, func() (migrate.Status, error)) (migrate.Status, error), check func(string) error) error {
	targets := []string{"a", "b", "c", "d"}
	fmt.Printf("\n7. durable split: %s is carved out onto d again, then split over %v, writes flowing\n", durableFat, targets)
	runID := fmt.Sprintf("split-%d", time.Now().UnixNano())
	if _, err := move("carve-out-again", func() (migrate.Status, error) {
		return co.Carve(ctx, migrate.CarveSpec{ID: runID + "-carve", Tenant: durableFat, Target: "d"})
	}); err != nil {
		return err
	}
	if err := check("d"); err != nil {
		return err
	}
	st, err := move("split", func() (migrate.Status, error) {
		return co.Split(ctx, migrate.SplitSpec{ID: runID + "-split", Tenant: durableFat, Targets: targets})
	})
	if err != nil {
		return err
	}
	tbl := w.r.Table()
	_, over := tbl.Overrides[durableFat]
	c.Check(st.State == migrate.OwnedB && !over && slices.Equal(tbl.Spreads[durableFat], targets),
		"%s is spread over %v (table generation %d)", durableFat, tbl.Spreads[durableFat], tbl.Generation)
	_, _, gerr := w.r.Shard("d").Get(ctx, routing.TenantUnit(durableFat), tbl.Generation, durableFat, "order-0")
	c.Check(errors.Is(gerr, routing.ErrStaleRoute), "its override unit on d refuses it (closed, kept until Cleanup): %v", gerr)
	// Every sub-bucket holds the keys that hash to it, and only those.
	per := make([]int, len(targets))
	for i := range durableSeed {
		rt, err := w.r.Route(durableFat, fmt.Sprintf("order-%d", i))
		if err != nil {
			return err
		}
		per[rt.Unit.Sub]++
		if i%97 == 0 {
			_, ok, err := rt.Shard.Get(ctx, rt.Unit, tbl.Generation, durableFat, fmt.Sprintf("order-%d", i))
			if err != nil {
				return err
			}
			c.Check(ok, "order-%d is in %s on %s", i, rt.Unit, rt.Shard.Name())
		}
	}
	fmt.Printf("   the seeded orders per sub-bucket: %v\n", per)
	return check(fmt.Sprint(targets))
}
