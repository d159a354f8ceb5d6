package stripes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/stripes"
)

// examplePrefix returns a key prefix of its own for one run of an example, so that every run
// starts with no counters.
func examplePrefix() string { return fmt.Sprintf("example:%d:", time.Now().UnixNano()) }

// exampleCounter returns a counter over the examples' server under a prefix of its own, and a
// func that closes it and its client.
func exampleCounter(o stripes.Options) (*stripes.Counter, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	o.Prefix = examplePrefix()
	c, err := stripes.New(rdb, o)
	if err != nil {
		panic(err)
	}
	return c, func() { _ = c.Close(); _ = rdb.Close() }
}

// A view counter split into 16 stripes; a bad option is refused with ErrInvalid.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	c, err := stripes.New(rdb, stripes.Options{
		Name:    "course:72:views",
		Stripes: 16,
		Prefix:  examplePrefix(), // fresh keys per run
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	for _, id := range []string{"view-1", "view-2", "view-3"} {
		if _, err := c.Add(ctx, stripes.Event{ID: id, Time: time.Now()}, 1); err != nil {
			panic(err)
		}
	}
	fmt.Println(c.Sum(ctx))

	_, err = stripes.New(rdb, stripes.Options{Name: "views", Stripes: 0})
	fmt.Println(errors.Is(err, stripes.ErrInvalid))
	// Output:
	// 3 <nil>
	// true
}

// Each view counts once however often it is retried.
func ExampleCounter_Add() {
	c, done := exampleCounter(stripes.Options{Name: "course:72:views", Stripes: 16})
	defer done()

	ctx := context.Background()
	view := stripes.Event{ID: "view-8f14e45f", Time: time.Now()}
	for range 3 { // the same Event, as every retry must carry
		res, err := c.Add(ctx, view, 1)
		fmt.Println("counted now:", res.Applied, err)
	}
	fmt.Println(c.Sum(ctx))
	// Output:
	// counted now: true <nil>
	// counted now: false <nil>
	// counted now: false <nil>
	// 1 <nil>
}

// AddBatch counts many events in one pipeline, with one result and one error each.
func ExampleCounter_AddBatch() {
	c, done := exampleCounter(stripes.Options{Name: "downloads", Stripes: 4})
	defer done()

	ctx := context.Background()
	now := time.Now()
	results, errs := c.AddBatch(ctx, []stripes.Addition{
		{Event: stripes.Event{ID: "d-1", Time: now}, Delta: 1},
		{Event: stripes.Event{ID: "d-2", Time: now}, Delta: 1},
		{Event: stripes.Event{ID: "d-1", Time: now}, Delta: 1}, // a retry of d-1
	})
	for i := range results {
		fmt.Println(results[i].Applied, errs[i])
	}
	fmt.Println(c.Sum(ctx))
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
	// 2 <nil>
}

// A host without event timestamps stamps each event once and stores the stamp with it.
func ExampleCounter_Stamp() {
	c, done := exampleCounter(stripes.Options{Name: "downloads", Stripes: 8})
	defer done()

	ctx := context.Background()
	ev, err := c.Stamp(ctx, "download-1234")
	if err != nil {
		panic(err)
	}
	fmt.Println("generation", ev.Gen)
	// ... persist ev with the job; every retry of the job calls Add(ctx, ev, 1).
	for range 2 {
		res, err := c.Add(ctx, ev, 1)
		fmt.Println(res.Applied, err)
	}
	// Output:
	// generation 1
	// true <nil>
	// false <nil>
}

// Changing the stripe count opens a new generation; retries of older events keep going to
// the stripes that counted them, and the sum covers every generation.
func ExampleCounter_Resize() {
	c, done := exampleCounter(stripes.Options{Name: "course:72:views", Stripes: 4})
	defer done()

	ctx := context.Background()
	view := stripes.Event{ID: "view-1", Time: time.Now()}
	if _, err := c.Add(ctx, view, 1); err != nil {
		panic(err)
	}
	fmt.Println(c.Resize(ctx, 16))
	fmt.Println(c.Resize(ctx, 16))  // a retried Resize changes nothing
	res, err := c.Add(ctx, view, 1) // a late retry of view-1
	fmt.Println(res.Applied, res.Gen, err)
	fmt.Println(c.Sum(ctx))
	// Output:
	// 2 <nil>
	// 2 <nil>
	// false 1 <nil>
	// 1 <nil>
}

// Layout shows how the counter is spread: its generations, their states and stripe values.
func ExampleCounter_Layout() {
	c, done := exampleCounter(stripes.Options{Name: "course:72:views", Stripes: 4})
	defer done()

	ctx := context.Background()
	for _, id := range []string{"v-1", "v-2", "v-3"} {
		if _, err := c.Add(ctx, stripes.Event{ID: id, Time: time.Now()}, 1); err != nil {
			panic(err)
		}
	}
	if _, err := c.Resize(ctx, 8); err != nil {
		panic(err)
	}
	lo, err := c.Layout(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("base", lo.Base, "dedup window", lo.DedupWindow)
	for _, g := range lo.Generations {
		fmt.Println("generation", g.Gen, g.State, g.Stripes, "stripes, total", g.Total)
	}
	// Output:
	// base 0 dedup window 10m0s
	// generation 1 closed 4 stripes, total 3
	// generation 2 open 8 stripes, total 0
}

// Seal folds a closed generation into the base value once its dedup window has passed (the
// background loop calls it; here it is off and the window short).
func ExampleCounter_Seal() {
	c, done := exampleCounter(stripes.Options{
		Name: "views", Stripes: 4, DedupWindow: 100 * time.Millisecond, SealInterval: -1,
	})
	defer done()

	ctx := context.Background()
	for _, id := range []string{"v-1", "v-2"} {
		if _, err := c.Add(ctx, stripes.Event{ID: id, Time: time.Now()}, 1); err != nil {
			panic(err)
		}
	}
	if _, err := c.Resize(ctx, 8); err != nil {
		panic(err)
	}
	var folded []uint64
	for deadline := time.Now().Add(30 * time.Second); len(folded) == 0; {
		if time.Now().After(deadline) {
			panic("generation 1 was never sealed")
		}
		time.Sleep(10 * time.Millisecond) // the window of generation 1 ends ~125ms after the Resize
		var err error
		if folded, err = c.Seal(ctx); err != nil {
			panic(err)
		}
	}
	lo, _ := c.Layout(ctx)
	fmt.Println("folded", folded, "base", lo.Base)
	fmt.Println(c.Sum(ctx))
	// Output:
	// folded [1] base 2
	// 2 <nil>
}

// Sum reads every stripe of every live generation in one pipeline, plus the sealed base.
func ExampleCounter_Sum() {
	c, done := exampleCounter(stripes.Options{Name: "likes", Stripes: 4})
	defer done()

	ctx := context.Background()
	_, _ = c.Add(ctx, stripes.Event{ID: "like-1", Time: time.Now()}, 1)
	_, _ = c.Add(ctx, stripes.Event{ID: "like-2", Time: time.Now()}, 1)
	_, _ = c.Add(ctx, stripes.Event{ID: "unlike-1", Time: time.Now()}, -1)
	fmt.Println(c.Sum(ctx))
	// Output:
	// 1 <nil>
}

// A dashboard reads the count through a cached reader: a storm of reads costs one Sum per
// interval.
func ExampleNewReader() {
	c, done := exampleCounter(stripes.Options{Name: "course:72:views", Stripes: 16})
	defer done()
	r, err := stripes.NewReader(c, stripes.ReaderOptions{MaxStaleness: time.Minute})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx := context.Background()
	_, _ = c.Add(ctx, stripes.Event{ID: "view-1", Time: time.Now()}, 1)
	for range 100 {
		if _, err := r.Value(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("sums read:", r.Stats().Refreshes)
	// Output:
	// sums read: 1
}

// Value serves the cached value while it is younger than MaxStaleness.
func ExampleReader_Value() {
	c, done := exampleCounter(stripes.Options{Name: "course:72:views", Stripes: 16})
	defer done()
	r, err := stripes.NewReader(c, stripes.ReaderOptions{MaxStaleness: time.Hour})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	ctx := context.Background()
	_, _ = c.Add(ctx, stripes.Event{ID: "view-1", Time: time.Now()}, 1)
	fmt.Println(r.Value(ctx))
	_, _ = c.Add(ctx, stripes.Event{ID: "view-2", Time: time.Now()}, 1)
	fmt.Println(r.Value(ctx)) // up to an hour old
	fmt.Println(c.Sum(ctx))
	st := r.Stats()
	fmt.Println("refreshes", st.Refreshes, "hits", st.Hits)
	// Output:
	// 1 <nil>
	// 1 <nil>
	// 2 <nil>
	// refreshes 1 hits 1
}

// ReadLayout shows how a counter is spread, from a process that does not know the settings
// it was created with.
func ExampleReadLayout() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	prefix := examplePrefix()
	c, err := stripes.New(rdb, stripes.Options{Name: "course:72:views", Stripes: 2, Prefix: prefix, DedupWindow: time.Hour})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	_, _ = c.Add(ctx, stripes.Event{ID: "view-1", Time: time.Now()}, 1)

	lo, err := stripes.ReadLayout(ctx, rdb, prefix, "course:72:views")
	if err != nil {
		panic(err) // errors.Is(err, stripes.ErrNoCounter) for a counter never used
	}
	fmt.Println("base", lo.Base, "dedup window", lo.DedupWindow)
	for _, g := range lo.Generations {
		fmt.Println("generation", g.Gen, g.State, g.Stripes, "stripes, total", g.Total)
	}
	_, err = stripes.ReadLayout(ctx, rdb, prefix, "never-used")
	fmt.Println(errors.Is(err, stripes.ErrNoCounter))
	// Output:
	// base 0 dedup window 1h0m0s
	// generation 1 open 2 stripes, total 1
	// true
}

// exampleFamily returns a family over the examples' server under a prefix of its own, with
// its loop and its sum cache off, and a func that closes it and its client.
func exampleFamily(o stripes.FamilyOptions) (*stripes.Family, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	o.Counter.Prefix = examplePrefix()
	if o.Interval == 0 {
		o.Interval = -1
	}
	o.MaxStaleness = -1
	f, err := stripes.NewFamily(rdb, o)
	if err != nil {
		panic(err)
	}
	return f, func() { _ = f.Close(); _ = rdb.Close() }
}

// Views per post: one Family for every post, one stripe per post until a post gets hot.
func ExampleNewFamily() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	views, err := stripes.NewFamily(rdb, stripes.FamilyOptions{
		Counter:    stripes.Options{Prefix: examplePrefix()},
		HotStripes: 16,   // a hot post is spread over 16 stripes...
		HotRate:    2000, // ...from 2,000 views per second through this process
	})
	if err != nil {
		panic(err)
	}
	defer views.Close()

	ctx := context.Background()
	now := time.Now()
	_, errs := views.AddBatch(ctx, []stripes.FamilyAddition{
		{Name: "post:1", Event: stripes.Event{ID: "view-a1", Time: now}, Delta: 1},
		{Name: "post:2", Event: stripes.Event{ID: "view-b7", Time: now}, Delta: 1},
		{Name: "post:2", Event: stripes.Event{ID: "view-b8", Time: now}, Delta: 1},
	})
	fmt.Println(errs) // retry each failed addition with the same Event
	fmt.Println(views.SumMany(ctx, []string{"post:1", "post:2"}))
	// Output:
	// [<nil> <nil> <nil>]
	// [1 2] [<nil> <nil>]
}

// Add counts an event once in one name's counter.
func ExampleFamily_Add() {
	views, done := exampleFamily(stripes.FamilyOptions{})
	defer done()

	ctx := context.Background()
	view := stripes.Event{ID: "view-1", Time: time.Now()}
	for range 2 {
		res, err := views.Add(ctx, "post:1", view, 1)
		fmt.Println(res.Applied, err)
	}
	fmt.Println(views.Sum(ctx, "post:1"))
	// Output:
	// true <nil>
	// false <nil>
	// 1 <nil>
}

// AddBatch counts events of many names in one pipeline.
func ExampleFamily_AddBatch() {
	views, done := exampleFamily(stripes.FamilyOptions{})
	defer done()

	ctx := context.Background()
	now := time.Now()
	results, errs := views.AddBatch(ctx, []stripes.FamilyAddition{
		{Name: "post:1", Event: stripes.Event{ID: "v-1", Time: now}, Delta: 1},
		{Name: "post:2", Event: stripes.Event{ID: "v-2", Time: now}, Delta: 1},
		{Name: "post:1", Event: stripes.Event{ID: "v-1", Time: now}, Delta: 1}, // a retry
	})
	for i := range results {
		fmt.Println(results[i].Applied, errs[i])
	}
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
}

// Resize spreads one name over more stripes by hand, as adaptive striping does.
func ExampleFamily_Resize() {
	views, done := exampleFamily(stripes.FamilyOptions{})
	defer done()

	ctx := context.Background()
	_, _ = views.Add(ctx, "post:launch", stripes.Event{ID: "v-1", Time: time.Now()}, 1)
	fmt.Println(views.Resize(ctx, "post:launch", 32))
	fmt.Println(views.Sum(ctx, "post:launch"))
	// Output:
	// 2 <nil>
	// 1 <nil>
}

// Sum reads one name's value (from the family's cache when MaxStaleness allows).
func ExampleFamily_Sum() {
	views, done := exampleFamily(stripes.FamilyOptions{})
	defer done()

	ctx := context.Background()
	_, _ = views.Add(ctx, "post:1", stripes.Event{ID: "v-1", Time: time.Now()}, 5)
	fmt.Println(views.Sum(ctx, "post:1"))
	fmt.Println(views.Sum(ctx, "post:never-viewed"))
	// Output:
	// 5 <nil>
	// 0 <nil>
}

// SumMany reads many names at once, with one error per name.
func ExampleFamily_SumMany() {
	views, done := exampleFamily(stripes.FamilyOptions{})
	defer done()

	ctx := context.Background()
	now := time.Now()
	_, _ = views.Add(ctx, "post:1", stripes.Event{ID: "v-1", Time: now}, 1)
	_, _ = views.Add(ctx, "post:3", stripes.Event{ID: "v-2", Time: now}, 3)
	fmt.Println(views.SumMany(ctx, []string{"post:1", "post:2", "post:3"}))
	// Output:
	// [1 0 3] [<nil> <nil> <nil>]
}

// hotNames is a HotDetector over a fixed set of names, standing for a hot-key detector.
type hotNames map[string]bool

func (h hotNames) IsHot(name string) bool { return h[name] }

// Tick runs one round of the family's loop; here the host's detector reports post:viral hot,
// and the round spreads it over HotStripes stripes.
func ExampleFamily_Tick() {
	views, done := exampleFamily(stripes.FamilyOptions{
		HotStripes: 16,
		Detector:   hotNames{"post:viral": true},
	})
	defer done()

	ctx := context.Background()
	now := time.Now()
	_, _ = views.Add(ctx, "post:viral", stripes.Event{ID: "v-1", Time: now}, 1)
	_, _ = views.Add(ctx, "post:quiet", stripes.Event{ID: "v-2", Time: now}, 1)
	fmt.Println(views.Tick(ctx))
	fmt.Println(views.Resize(ctx, "post:viral", 16)) // already there: nothing to do
	fmt.Println(views.Resize(ctx, "post:quiet", 1))  // never promoted
	// Output:
	// <nil>
	// 2 <nil>
	// 1 <nil>
}
