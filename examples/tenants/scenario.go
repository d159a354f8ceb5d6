package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

const (
	tenantCount    = 100_000
	buckets        = 1024
	big            = "merchant-42"
	bigKeys        = 400  // merchant 42's catalogue, read with Zipf(1.2)
	bigShare       = 0.5  // of all requests
	requests       = 8000 // per phase
	readers        = 16
	hotListed      = 50 // keys warmed before the flip
	cacheTTL       = 10 * time.Minute
	shareTolerance = 0.1
)

var shared = []string{"a", "b", "c"}

type world struct {
	t      *redisenv.Target
	shards map[string]redis.UniversalClient
	r      *routing.Router
	prefix string // key prefix of this run in the cache
	det    *hotkeys.Detector
}

// phase is what one round of traffic did.
type phase struct {
	perShard    map[string]int64 // requests routed to each shard
	bigPerShard map[string]int64 // merchant 42's requests per shard
	misses      map[string]int64 // cache misses (source loads) per tenant class: "big", "other"
	hotMisses   int64            // misses of the keys that were warmed
	hot         bool             // whether warmed keys were given
	gen         uint64
}

func run(ctx context.Context, t *redisenv.Target, shards map[string]redis.UniversalClient, c *checker) error {
	runID := fmt.Sprintf("celebrity-example-%d", time.Now().UnixNano())
	prefix := runID + ":routing"
	store, err := routing.NewStore(t.Client, routing.StoreOptions{Prefix: prefix})
	if err != nil {
		return err
	}
	tbl := routing.EvenTable(1, buckets, shared...)
	tbl.Shards = append(tbl.Shards, "d") // known, not yet used
	if err := store.Publish(ctx, tbl); err != nil {
		return err
	}
	scr := map[string]routing.ShardClient{}
	cc := map[string]migrate.ShardClient{}
	for n, s := range shards {
		scr[n], cc[n] = s, s
	}
	r, err := routing.New(t.Client, routing.Options{Shards: scr, Prefix: prefix})
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Await(ctx, 1); err != nil {
		return err
	}
	det, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: -1, Capacity: 4096, TopK: hotListed})
	if err != nil {
		return err
	}
	defer det.Close()
	w := &world{t: t, shards: shards, r: r, prefix: runID + ":cache:", det: det}
	mv, err := migrate.NewCache(t.Client, migrate.CacheOptions{Shards: cc, Prefix: prefix})
	if err != nil {
		return err
	}

	// 1. Placement of 100,000 tenants.
	fmt.Printf("1. %d merchants hash-routed: xxhash64(id) %% %d buckets, buckets split evenly over a, b, c\n", tenantCount, buckets)
	counts := map[string]int{}
	twice := 0
	for i := range tenantCount {
		id := fmt.Sprintf("merchant-%d", i)
		r1, err := r.Route(id, "k")
		if err != nil {
			return err
		}
		r2, _ := r.Route(id, "other-key")
		if r1.Shard.Name() != r2.Shard.Name() {
			twice++
		}
		counts[r1.Shard.Name()]++
	}
	home, _ := r.Route(big, "k")
	fmt.Printf("   merchants per shard: a=%d b=%d c=%d; %s lives on %s (%v)\n", counts["a"], counts["b"], counts["c"],
		big, home.Shard.Name(), home.Unit)
	even := true
	for _, s := range shared {
		even = even && within(float64(counts[s]), tenantCount/3.0, shareTolerance)
	}
	c.Check(twice == 0, "every merchant's keys route to one shard (%d split)", twice)
	c.Check(even, "the shared shards hold about a third of the merchants each (±%.0f%%)", shareTolerance*100)

	// 2. Merchant 42 grows.
	fmt.Printf("\n2. %s grows to %.0f%% of all requests\n", big, bigShare*100)
	p, err := w.traffic(ctx, nil)
	if err != nil {
		return err
	}
	w.print(p)
	c.Check(p.perShard[home.Shard.Name()] > 2*p.perShard[other(home.Shard.Name())],
		"%s's shard %s is the hot one", big, home.Shard.Name())
	det.Evaluate()
	top, err := det.Top(hotListed * 4)
	if err != nil {
		return err
	}
	var hot []string
	for _, k := range top {
		if strings.HasPrefix(k.Key, w.prefix+big+":") && len(hot) < hotListed {
			hot = append(hot, k.Key)
		}
	}
	fmt.Printf("   hotkeys: %d hottest keys of %s, the top one at %.1f%% of requests\n", len(hot), big, top[0].Share*100)

	// 3. Cache-mode move to the dedicated shard d.
	fmt.Printf("\n3. cache-mode move of %s to shard d: warm its %d hottest keys, then flip an override\n", big, len(hot))
	st, err := mv.Move(ctx, migrate.CacheSpec{ID: runID + "-move-1", Tenant: big, Target: "d", Keys: hot})
	if err != nil {
		return err
	}
	fmt.Printf("   %s: warmed %d, missing %d, flipped at generation %d, rollback safe until %s\n",
		st.State, st.Warmed, st.Missing, st.FlipGen, st.OldCopyExpires.Format(time.TimeOnly))
	if _, err := r.Await(ctx, st.FlipGen); err != nil {
		return err
	}
	p, err = w.traffic(ctx, hot)
	if err != nil {
		return err
	}
	w.print(p)
	c.Check(st.Warmed == len(hot) && p.bigPerShard["d"] == sum(p.bigPerShard),
		"after the flip every request of %s goes to d (%d of %d)", big, p.bigPerShard["d"], sum(p.bigPerShard))
	c.Check(p.hotMisses == 0, "the warmed keys were hits on d from the first request (%d misses)", p.hotMisses)

	// 4. Rollback while the old copy lives.
	fmt.Println("\n4. rollback (the old copy has not expired): flip back to the warm source")
	rb, err := mv.Rollback(ctx, st.ID)
	if err != nil {
		return err
	}
	if _, err := r.Await(ctx, rb.BackGen); err != nil {
		return err
	}
	p, err = w.traffic(ctx, hot)
	if err != nil {
		return err
	}
	fmt.Printf("   %s at generation %d\n", rb.State, rb.BackGen)
	w.print(p)
	c.Check(rb.BackGen > st.FlipGen, "the rollback is a new generation (%d > %d), never an old table", rb.BackGen, st.FlipGen)
	c.Check(p.bigPerShard[home.Shard.Name()] == sum(p.bigPerShard) && p.hotMisses == 0,
		"after the rollback %s is served by %s again, warm (%d hot-key misses)", big, home.Shard.Name(), p.hotMisses)

	// 5. Move again, finish, then spread over four shards.
	st2, err := mv.Move(ctx, migrate.CacheSpec{ID: runID + "-move-2", Tenant: big, Target: "d", Keys: hot})
	if err != nil {
		return err
	}
	if _, err := mv.Finish(ctx, st2.ID); err != nil {
		return err
	}
	cur, err := store.Load(ctx)
	if err != nil {
		return err
	}
	next := cur.Next()
	next.SetOverride(big, "")
	spreadOver := []string{"a", "b", "c", "d"}
	next.SetSpread(big, spreadOver)
	if err := store.Publish(ctx, next); err != nil {
		return err
	}
	if _, err := r.Await(ctx, next.Generation); err != nil {
		return err
	}
	fmt.Printf("\n5. moved to d again (generation %d), then spread over a, b, c, d (generation %d): "+
		"each key of %s goes to sub-bucket xxhash64(key) %% 4\n", st2.FlipGen, next.Generation, big)
	p, err = w.traffic(ctx, nil)
	if err != nil {
		return err
	}
	w.print(p)
	// Where each key goes is the spread's rule itself, not chance: count the keys per shard
	// as the router places them and as the rule says, and compare.
	keysPer, want := map[string]int{}, map[string]int{}
	for k := range bigKeys {
		key := w.key(big, k)
		rt, err := r.Route(big, key)
		if err != nil {
			return err
		}
		keysPer[rt.Shard.Name()]++
		want[spreadOver[xxhash.Sum64String(key)%uint64(len(spreadOver))]]++
	}
	fmt.Printf("   %s's %d keys per shard: a=%d b=%d c=%d d=%d (xxhash64(key) %% 4 says a=%d b=%d c=%d d=%d)\n", big, bigKeys,
		keysPer["a"], keysPer["b"], keysPer["c"], keysPer["d"], want["a"], want["b"], want["c"], want["d"])
	c.Check(maps.Equal(keysPer, want) && len(keysPer) == len(spreadOver),
		"the spread puts each of %s's keys on the shard of its sub-bucket, and every one of the four shards holds some", big)
	return durable(ctx, w, shards, prefix, runID, c)
}

// key is the cache key of tenant's item n.
func (w *world) key(tenant string, n int) string {
	return fmt.Sprintf("%s%s:item:%d", w.prefix, tenant, n)
}

// traffic runs one phase of requests: route, GET, on a miss load and SET. hot lists the keys
// whose misses are counted apart.
func (w *world) traffic(ctx context.Context, hot []string) (phase, error) {
	isHot := map[string]bool{}
	for _, k := range hot {
		isHot[k] = true
	}
	p := phase{perShard: map[string]int64{}, bigPerShard: map[string]int64{}, misses: map[string]int64{},
		gen: w.r.Generation(), hot: len(hot) > 0}
	var mu sync.Mutex
	var hotMisses atomic.Int64
	var firstErr error
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			zipf := rand.NewZipf(rng, 1.2, 1, bigKeys-1)
			local := phase{perShard: map[string]int64{}, bigPerShard: map[string]int64{}, misses: map[string]int64{}}
			for range requests / readers {
				tenant, class, n := fmt.Sprintf("merchant-%d", rng.IntN(tenantCount)), "other", rng.IntN(20)
				if rng.Float64() < bigShare {
					tenant, class, n = big, "big", int(zipf.Uint64())
				}
				key := w.key(tenant, n)
				rt, err := w.r.Route(tenant, key)
				if err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
					return
				}
				name := rt.Shard.Name()
				w.det.Observe(key)
				local.perShard[name]++
				if class == "big" {
					local.bigPerShard[name]++
				}
				cl := w.shards[name]
				if err := cl.Get(ctx, key).Err(); errors.Is(err, redis.Nil) {
					local.misses[class]++
					if isHot[key] {
						hotMisses.Add(1)
					}
					err = cl.Set(ctx, key, "value of "+key, cacheTTL).Err()
					if err != nil {
						mu.Lock()
						firstErr = cmp(firstErr, err)
						mu.Unlock()
						return
					}
				} else if err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for k, v := range local.perShard {
				p.perShard[k] += v
			}
			for k, v := range local.bigPerShard {
				p.bigPerShard[k] += v
			}
			for k, v := range local.misses {
				p.misses[k] += v
			}
		})
	}
	wg.Wait()
	p.hotMisses = hotMisses.Load()
	return p, firstErr
}

func (w *world) print(p phase) {
	names := make([]string, 0, len(p.perShard))
	for n := range p.perShard {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%d (%s %d)", n, p.perShard[n], big, p.bigPerShard[n]))
	}
	fmt.Printf("   generation %d, %d requests; per shard: %s\n", p.gen, requests, strings.Join(parts, ", "))
	fmt.Printf("   cache misses (source loads): %s %d, other merchants %d", big, p.misses["big"], p.misses["other"])
	if p.hot {
		fmt.Printf("; of the warmed keys %d", p.hotMisses)
	}
	fmt.Println()
}

func within(v, want, tol float64) bool { return v >= want*(1-tol) && v <= want*(1+tol) }

func sum(m map[string]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// other returns a shared shard that is not s.
func other(s string) string {
	i := slices.Index(shared, s)
	return shared[(i+1)%len(shared)]
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
