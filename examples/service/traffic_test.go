package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// recorder keeps what the users of the service saw: every call's time, the versions reads
// returned and PUTs acknowledged, the views acknowledged, the payments admitted.
type recorder struct {
	mu        sync.Mutex
	calls     map[string]int
	failed    map[string]int
	late      map[string]int
	slowest   map[string]time.Duration
	reads     []readRec
	puts      map[string][]putRec
	views     map[string]*viewRec // event ID -> view
	pays      []payRec
	stripedAt map[string]time.Time // process -> first celebrity view in a stripe other than 0
	lateCalls []lateCall
}

type lateCall struct {
	kind, proc string
	end        time.Time
	call       call
}

type readRec struct {
	id      string
	start   time.Time
	version uint64
}

type putRec struct {
	version uint64
	done    time.Time
}

type viewRec struct {
	post  string
	acked bool
}

type payRec struct {
	at      int64 // decision time, unix µs
	allowed bool
	under50 bool // sent while the merchant's traffic was under half its limit
}

func newRecorder() *recorder {
	return &recorder{calls: map[string]int{}, failed: map[string]int{}, late: map[string]int{},
		slowest: map[string]time.Duration{}, puts: map[string][]putRec{}, views: map[string]*viewRec{},
		stripedAt: map[string]time.Time{}}
}

// took records one call of kind; a call that took longer than Deadline+50ms is late.
func (r *recorder) took(kind string, c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[kind]++
	if c.Err != nil || (c.Status != http.StatusOK && c.Status != http.StatusTooManyRequests) {
		r.failed[kind]++
	}
	if c.Took > Deadline+50*time.Millisecond {
		r.late[kind]++
		r.lateCalls = append(r.lateCalls, lateCall{kind: kind, proc: c.proc, end: time.Now(), call: c})
	}
	r.slowest[kind] = max(r.slowest[kind], c.Took)
}

// traffic drives the users: Zipf reads and views over the posts, the celebrity's reads,
// views and edits while it is on, other edits, and a merchant's payments.
type traffic struct {
	g         *gameday
	rec       *recorder
	celebrity string
	merchant  string
	posts     int
	celebOn   atomic.Bool
	overload  atomic.Bool
	overEnd   atomic.Int64 // unix ns when the overload ended
	events    atomic.Int64
	wg        sync.WaitGroup
}

// every calls f rate times a second, each in its own goroutine, while on() holds, until ctx ends.
func (tr *traffic) every(ctx context.Context, rate float64, on func() bool, f func(ctx context.Context, r *rand.Rand)) {
	tr.wg.Go(func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		seed := rand.Uint64()
		for i := uint64(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if on != nil && !on() {
				continue
			}
			r := rand.New(rand.NewPCG(seed, i))
			tr.wg.Go(func() { f(context.WithoutCancel(ctx), r) })
		}
	})
}

func (tr *traffic) read(ctx context.Context, id string) {
	p := tr.g.pick()
	start := time.Now()
	post, c := p.cl.getPost(ctx, id)
	c.proc = p.name
	tr.rec.took("GET /posts", c)
	if c.Status == http.StatusOK {
		tr.rec.mu.Lock()
		tr.rec.reads = append(tr.rec.reads, readRec{id: id, start: start, version: post.Version})
		tr.rec.mu.Unlock()
	}
}

func (tr *traffic) put(ctx context.Context, id string) {
	p := tr.g.pick()
	post, c := p.cl.putPost(ctx, id, fmt.Sprintf("edit at %s", time.Now().Format(time.StampMicro)))
	c.proc = p.name
	tr.rec.took("PUT /posts", c)
	if c.Status == http.StatusOK {
		tr.rec.mu.Lock()
		tr.rec.puts[id] = append(tr.rec.puts[id], putRec{version: post.Version, done: time.Now()})
		tr.rec.mu.Unlock()
	}
}

// view sends one view and retries it with the same event until it is acknowledged (at most
// 6 attempts, as a client's retry budget).
func (tr *traffic) view(ctx context.Context, id string) { tr.viewAs(ctx, "POST /views", id) }

// viewAs is view with the calls recorded under kind.
func (tr *traffic) viewAs(ctx context.Context, kind, id string) {
	ev, at := fmt.Sprintf("ev-%d", tr.events.Add(1)), time.Now()
	tr.rec.mu.Lock()
	tr.rec.views[ev] = &viewRec{post: id}
	tr.rec.mu.Unlock()
	for range 6 {
		p := tr.g.pick()
		v, c := p.cl.view(ctx, id, ev, at)
		c.proc = p.name
		tr.rec.took(kind, c)
		if c.Status == http.StatusOK {
			tr.rec.mu.Lock()
			tr.rec.views[ev].acked = true
			if id == tr.celebrity && v.Stripe > 0 {
				if _, ok := tr.rec.stripedAt[p.name]; !ok {
					tr.rec.stripedAt[p.name] = time.Now()
				}
			}
			tr.rec.mu.Unlock()
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (tr *traffic) pay(ctx context.Context) {
	under50 := !tr.overload.Load() && time.Since(time.Unix(0, tr.overEnd.Load())) > 2*MerchantLimit.Period
	p := tr.g.pick()
	res, c := p.cl.pay(ctx, tr.merchant)
	c.proc = p.name
	tr.rec.took("POST /payments", c)
	if c.Status == http.StatusOK || c.Status == http.StatusTooManyRequests {
		tr.rec.mu.Lock()
		tr.rec.pays = append(tr.rec.pays, payRec{at: res.At, allowed: res.Allowed, under50: under50})
		tr.rec.mu.Unlock()
	}
}

// zipf returns a post ID drawn from Zipf(1.1) over the posts.
func (tr *traffic) zipf(r *rand.Rand) string {
	// Inverse transform over precomputed weights would be exact; rejection keeps it short.
	for {
		k := int(float64(tr.posts) * r.Float64())
		if r.Float64() < 1/float64(k+1) {
			return fmt.Sprint(k)
		}
	}
}

func (tr *traffic) start(ctx context.Context, pl plan) {
	tr.overEnd.Store(time.Now().Add(-time.Hour).UnixNano())
	celeb := tr.celebOn.Load
	over := tr.overload.Load
	tr.every(ctx, pl.zipfReads, nil, func(ctx context.Context, r *rand.Rand) { tr.read(ctx, tr.zipf(r)) })
	tr.every(ctx, pl.zipfViews, nil, func(ctx context.Context, r *rand.Rand) { tr.view(ctx, tr.zipf(r)) })
	tr.every(ctx, pl.zipfPuts, nil, func(ctx context.Context, r *rand.Rand) { tr.put(ctx, tr.zipf(r)) })
	tr.every(ctx, pl.celebReads, celeb, func(ctx context.Context, _ *rand.Rand) { tr.read(ctx, tr.celebrity) })
	tr.every(ctx, pl.celebViews, celeb, func(ctx context.Context, _ *rand.Rand) { tr.view(ctx, tr.celebrity) })
	tr.every(ctx, pl.celebPuts, celeb, func(ctx context.Context, _ *rand.Rand) { tr.put(ctx, tr.celebrity) })
	rate := float64(MerchantLimit.Rate) / MerchantLimit.Period.Seconds()
	tr.every(ctx, 0.4*rate, nil, func(ctx context.Context, _ *rand.Rand) { tr.pay(ctx) })
	tr.every(ctx, 1.1*rate, over, func(ctx context.Context, _ *rand.Rand) { tr.pay(ctx) })
}

// staleReads checks every read against the PUTs acknowledged before it started: a read that
// started more than bound after a PUT returned must see that version or a newer one. It
// returns the violations and the longest time a read saw an older version after a PUT
// returned.
func (r *recorder) staleReads(bound time.Duration) (violations int, worst time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.puts {
		sort.Slice(r.puts[id], func(i, j int) bool { return r.puts[id][i].done.Before(r.puts[id][j].done) })
	}
	for _, rd := range r.reads {
		for _, p := range r.puts[rd.id] {
			if !p.done.Before(rd.start) {
				break
			}
			if rd.version < p.version {
				lag := rd.start.Sub(p.done)
				worst = max(worst, lag)
				if lag > bound {
					violations++
				}
				break // the earliest PUT it missed sets the lag
			}
		}
	}
	return violations, worst
}
