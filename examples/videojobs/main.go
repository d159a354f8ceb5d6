// Command videojobs runs a video-encoding service with a strict limit: at most 100 encoding
// jobs at once, worldwide (the licence of the encoder says so). The 100 permits are split
// between two regions, eu (permits 1–50) and us (51–100), with escrow.Pool, so each region
// grants its own permits without asking the other. The us region gets busier than eu, so the
// operator moves 10 permits from eu to us while both regions keep encoding — and the network
// loses the acknowledgement of every step of that transfer. A job whose grant reply was lost
// retries and gets the same permit.
//
// It exits non-zero when an invariant breaks: more than 100 jobs (or more than a region's
// permits) ran at once, one permit was held by two jobs, a permit's fencing token went
// backwards, the transfer created or lost capacity, or the final audit is not clean.
//
//	go run ./videojobs                                  # embedded in-process Redis
//	REDIS_ADDR=127.0.0.1:6379 go run ./videojobs
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/examples/internal/invariant"
	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
)

const (
	capacity  = 100
	transferK = 10
	euWorkers = 30 // eu needs fewer than its 50 permits
	usWorkers = 80 // us wants more than its 50
	phase     = 1500 * time.Millisecond
	encode    = 30 * time.Millisecond // one job
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t, err := redisenv.Connect(ctx, redisenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "videojobs:", err)
		os.Exit(2)
	}
	defer t.Close()
	fmt.Printf("videojobs: at most %d encoding jobs at once, split eu 1-50 / us 51-100; %d eu and %d us workers\n",
		capacity, euWorkers, usWorkers)
	fmt.Printf("running against: %s\n\n", t.Desc)
	if err := run(ctx, t); err != nil {
		fmt.Fprintln(os.Stderr, "videojobs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, t *redisenv.Target) error {
	opts := escrow.PoolOptions{
		Name:     fmt.Sprintf("videojobs-%d", time.Now().UnixNano()),
		Capacity: capacity,
		Owners:   []escrow.Owner{{Name: "eu", First: 1, Last: 50}, {Name: "us", First: 51, Last: 100}},
		Prefix:   "celebrity-example:escrow:",
		// The embedded server and test servers have no maxmemory policy to worry about; a
		// production pool keeps the default refusal of evicting policies.
		AllowEviction: t.Kind == redisenv.Embedded,
		// The example's servers may run without AOF, and a standalone target keeps ledgers
		// and witnesses on one server; a production pool keeps the default refusals
		// (ErrWeakDurability, ErrSharedWitness) and gives a Witness on another server.
		AllowWeakDurability: true,
		AllowSharedWitness:  t.Kind != redisenv.Cluster,
	}
	pool, err := escrow.NewPool(t.Client, opts)
	if err != nil {
		return err
	}
	if err := pool.Init(ctx); err != nil {
		return err
	}
	// The coordinator's connections lose replies on demand: the command runs on the server,
	// the reply never arrives.
	inj := faults.New()
	fc := redisenv.Faulty(t.Client, inj.Dialer(nil))
	defer fc.Close()
	lossy, err := escrow.NewPool(fc, opts)
	if err != nil {
		return err
	}

	w := newWorld()
	var c invariant.Checker
	// A first round trip of permits without faults: eu lends us one permit and takes it
	// back. (It also puts the transfer scripts in the servers' script caches, so that every
	// dropped reply below is the reply of a step that ran.)
	for i, dir := range [][2]string{{"eu", "us"}, {"us", "eu"}} {
		if err := pool.Transfer(ctx, dir[0], dir[1], 1, fmt.Sprintf("t-warm-%d-%s", i, opts.Name)); err != nil {
			return fmt.Errorf("transfer %s -> %s: %w", dir[0], dir[1], err)
		}
	}
	fmt.Println("1. before the day starts, eu lends us 1 permit and takes it back (no faults)")
	fmt.Println("2. both regions encode; us has more workers than permits")
	w.start(ctx, pool)
	time.Sleep(phase)
	before := w.snapshot()
	fmt.Printf("   eu: max %d jobs at once; us: max %d at once, %d acquires refused (ErrExhausted)\n",
		before.maxEU, before.maxUS, before.exhaustedUS)

	fmt.Printf("3. move %d permits eu -> us while encoding; every step's acknowledgement is lost once\n", transferK)
	id := "t-eu-us-" + opts.Name
	// Each step is idempotent by transfer ID: after a lost reply the same step is repeated.
	// A lost acknowledgement of the delivery is resolved by asking the target again
	// (delivering again), never by a timeout.
	var frozen escrow.Frozen
	steps := []struct {
		name string
		do   func() error
	}{
		{"freeze 10 free permits at eu", func() (err error) {
			frozen, err = lossy.Freeze(ctx, "eu", "us", transferK, id)
			return err
		}},
		{"deliver to us (us accepts once)", func() error { return lossy.Deliver(ctx, frozen) }},
		{"complete at eu", func() error { return lossy.Complete(ctx, "eu", id) }},
	}
	for _, st := range steps {
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: id}, 1)
		for attempt := 1; ; attempt++ {
			err := st.do()
			if err == nil {
				fmt.Printf("   %-32s attempt %d: ok\n", st.name, attempt)
				break
			}
			fmt.Printf("   %-32s attempt %d: %v\n", st.name, attempt, err)
			if !errors.Is(err, faults.ErrReplyDropped) || attempt == 5 {
				return fmt.Errorf("transfer step %q: %w", st.name, err)
			}
		}
	}
	fmt.Printf("   permits moved: %v (%d replies dropped on the way)\n", frozen.Permits, inj.Dropped())
	w.resetMax()
	time.Sleep(phase)
	after := w.snapshot()
	fmt.Printf("   after the transfer: eu max %d jobs at once, us max %d\n", after.maxEU, after.maxUS)

	w.stop()
	fmt.Println("4. the day's work is done; a last job's grant reply is lost and it retries with the same job ID")
	job := "job-lost-reply-" + opts.Name
	inj.DropReply(faults.Match{Command: "EVALSHA", Arg: job}, 1)
	_, lostErr := lossy.Acquire(ctx, "us", job)
	fmt.Printf("   first try: %v\n", lostErr)
	var g escrow.Grant
	for range 5 {
		if g, err = pool.Acquire(ctx, "us", job); !errors.Is(err, escrow.ErrExhausted) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("retrying the lost acquire: %w", err)
	}
	fmt.Printf("   retry: permit %d, token %d, replayed=%v\n", g.Permit, g.Token, g.Replayed)
	if err := pool.Release(ctx, "us", job); err != nil {
		return err
	}

	fmt.Println("5. with the workers stopped, each region grants exactly its permits")
	grants := map[string]int{}
	for _, region := range []string{"eu", "us"} {
		for i := 1; i <= capacity+1; i++ {
			_, err := pool.Acquire(ctx, region, fmt.Sprintf("probe-%s-%d", region, i))
			if errors.Is(err, escrow.ErrExhausted) {
				break
			}
			if err != nil {
				return err
			}
			grants[region]++
		}
		fmt.Printf("   %s: %d grants, then ErrExhausted\n", region, grants[region])
		for i := 1; i <= grants[region]; i++ {
			if err := pool.Release(ctx, region, fmt.Sprintf("probe-%s-%d", region, i)); err != nil {
				return err
			}
		}
	}

	final := w.snapshot()
	rep, err := pool.Audit(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d jobs encoded; audit: %s\n\n", final.done, rep.String())
	free := map[string]int{}
	for _, o := range rep.Owners {
		free[o.Owner] = o.Free
	}
	c.Check(final.maxTotal <= capacity, "never more than %d jobs at once (max seen %d)", capacity, final.maxTotal)
	c.Check(before.maxUS <= 50 && after.maxUS <= 60 && after.maxEU <= 40,
		"each region stayed within its permits (us %d then %d of 50 then 60; eu %d of 40 after)",
		before.maxUS, after.maxUS, after.maxEU)
	c.Check(final.doubleHeld == 0, "no permit was held by two jobs at once (%d times)", final.doubleHeld)
	c.Check(final.tokenBackwards == 0, "every permit's fencing token only grew (%d regressions)", final.tokenBackwards)
	c.Check(final.errs == 0, "no worker saw an error other than ErrExhausted (%d)", final.errs)
	c.Check(lostErr != nil && g.Replayed, "the lost grant was replayed on retry, not granted twice")
	c.Check(rep.Clean() && free["eu"] == 40 && free["us"] == 60,
		"the audit is clean and the transfer moved exactly %d permits (eu %d free, us %d free)",
		transferK, free["eu"], free["us"])
	c.Check(grants["eu"] == 40 && grants["us"] == 60, "after the transfer eu grants exactly 40 and us exactly 60 (%d, %d)",
		grants["eu"], grants["us"])
	c.Exit("videojobs")
	return nil
}

// world runs the workers and keeps what they saw.
type world struct {
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	holder         [capacity + 1]atomic.Int32
	mu             sync.Mutex
	lastToken      [capacity + 1]int64
	running        map[string]*atomic.Int64
	maxRegion      map[string]*atomic.Int64
	total, maxTot  atomic.Int64
	done, errs     atomic.Int64
	exhaustedUS    atomic.Int64
	doubleHeld     atomic.Int64
	tokenBackwards atomic.Int64
}

type snapshot struct {
	maxEU, maxUS, maxTotal     int64
	exhaustedUS, done, errs    int64
	doubleHeld, tokenBackwards int64
}

func newWorld() *world {
	w := &world{running: map[string]*atomic.Int64{}, maxRegion: map[string]*atomic.Int64{}}
	for _, r := range []string{"eu", "us"} {
		w.running[r], w.maxRegion[r] = new(atomic.Int64), new(atomic.Int64)
	}
	return w
}

func (w *world) start(ctx context.Context, pool *escrow.Pool) {
	ctx, w.cancel = context.WithCancel(ctx)
	for i := range euWorkers + usWorkers {
		region := "eu"
		if i >= euWorkers {
			region = "us"
		}
		w.wg.Go(func() { w.work(ctx, pool, region, i) })
	}
}

func (w *world) work(ctx context.Context, pool *escrow.Pool, region string, id int) {
	// Grants and releases run to completion even when the run stops: a grant whose reply
	// was abandoned would hold its permit until released.
	io := context.WithoutCancel(ctx)
	for n := 0; ctx.Err() == nil; n++ {
		job := fmt.Sprintf("%s-worker%d-job%d", region, id, n)
		g, err := pool.Acquire(io, region, job)
		if errors.Is(err, escrow.ErrExhausted) {
			if region == "us" {
				w.exhaustedUS.Add(1)
			}
			sleep(ctx, time.Millisecond)
			n--
			continue
		}
		if err != nil {
			w.errs.Add(1)
			return
		}
		w.hold(region, g)
		sleep(ctx, encode)
		w.unhold(region, g)
		if err := pool.Release(io, region, job); err != nil {
			w.errs.Add(1)
			return
		}
		w.done.Add(1)
	}
}

func (w *world) hold(region string, g escrow.Grant) {
	if !w.holder[g.Permit].CompareAndSwap(0, 1) {
		w.doubleHeld.Add(1)
	}
	w.mu.Lock()
	if g.Token <= w.lastToken[g.Permit] {
		w.tokenBackwards.Add(1)
	}
	w.lastToken[g.Permit] = g.Token
	w.mu.Unlock()
	r := w.running[region].Add(1)
	raise(w.maxRegion[region], r)
	raise(&w.maxTot, w.total.Add(1))
}

func (w *world) unhold(region string, g escrow.Grant) {
	w.total.Add(-1)
	w.running[region].Add(-1)
	w.holder[g.Permit].Store(0)
}

func raise(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

func (w *world) resetMax() {
	w.maxRegion["eu"].Store(0)
	w.maxRegion["us"].Store(0)
}

func (w *world) stop() {
	w.cancel()
	w.wg.Wait()
}

func (w *world) snapshot() snapshot {
	return snapshot{
		maxEU: w.maxRegion["eu"].Load(), maxUS: w.maxRegion["us"].Load(), maxTotal: w.maxTot.Load(),
		exhaustedUS: w.exhaustedUS.Load(), done: w.done.Load(), errs: w.errs.Load(),
		doubleHeld: w.doubleHeld.Load(), tokenBackwards: w.tokenBackwards.Load(),
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
