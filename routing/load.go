package routing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/slot"
	"github.com/celebrity-go/celebrity/internal/spacesaving"
)

// Defaults of LoadOptions.
const (
	// DefaultLoadInterval is the length of one interval of the per-tenant load summary: a
	// Router publishes its counts once per interval.
	DefaultLoadInterval = 10 * time.Second
	// DefaultLoadCapacity is how many tenants one Router tracks per interval.
	DefaultLoadCapacity = 1024
	// DefaultLoadRetention is how long a published interval stays in the control Redis.
	DefaultLoadRetention = 10 * time.Minute
)

// LoadOptions turn on and configure the Router's per-tenant load summary (see
// [ReadTenantLoad]). The zero value is off: a Router then counts nothing and publishes
// nothing.
type LoadOptions struct {
	// Enabled turns counting and publishing on. Default: off.
	Enabled bool
	// Interval is the length of one summary interval, 10ms..1h. Intervals are aligned on
	// the Unix epoch (by Options.Clock), so that every Router with the same Interval adds
	// to the same interval. Default: DefaultLoadInterval.
	Interval time.Duration
	// Capacity bounds the tenants one Router tracks per interval, 8..65536: memory is fixed
	// by it, however many tenants call. When more tenants call, the busiest are kept and
	// each count overstates a tenant's operations by at most the error it is published with
	// (at most the interval's operations / Capacity). Default: DefaultLoadCapacity.
	Capacity int
	// Retention is how long a published interval stays in the control Redis, Interval..7 days.
	// Default: DefaultLoadRetention, or 2×Interval if that is longer.
	Retention time.Duration
	// Instance names this Router in its reports (1..128 bytes). Two Routers must not share
	// one: the second's report of an interval would be taken for a retry of the first's.
	// Default: 16 random hex digits.
	Instance string
}

// loadStripes spreads the count of concurrent calls over independently locked summaries; a
// tenant always counts in the stripe its hash picks, so the stripes never track one tenant
// twice.
const loadStripes = 8

func (o LoadOptions) withDefaults() (LoadOptions, error) {
	if !o.Enabled {
		return o, nil
	}
	if o.Interval == 0 {
		o.Interval = DefaultLoadInterval
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultLoadCapacity
	}
	if o.Retention == 0 {
		o.Retention = max(DefaultLoadRetention, 2*o.Interval)
	}
	if o.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		o.Instance = hex.EncodeToString(b[:])
	}
	switch {
	case o.Interval < 10*time.Millisecond || o.Interval > time.Hour:
		return o, invalidf("Options.Load.Interval must be 10ms..1h, got %v", o.Interval)
	case o.Capacity < 8 || o.Capacity > 65536:
		return o, invalidf("Options.Load.Capacity must be 8..65536, got %d", o.Capacity)
	case o.Retention < o.Interval || o.Retention > 7*24*time.Hour:
		return o, invalidf("Options.Load.Retention must be Interval (%v)..168h, got %v", o.Interval, o.Retention)
	case len(o.Instance) > 128:
		return o, invalidf("Options.Load.Instance must be 1..128 bytes, got %d", len(o.Instance))
	}
	return o, nil
}

// loadCounter counts a Router's operations per tenant in bounded summaries.
type loadCounter struct {
	stripes [loadStripes]loadStripe
}

type loadStripe struct {
	mu  sync.Mutex
	ss  spacesaving.Summary
	ops uint64
	_   [40]byte // keep stripes on separate cache lines
}

func newLoadCounter(capacity int) *loadCounter {
	c := &loadCounter{}
	per := (capacity + loadStripes - 1) / loadStripes
	for i := range c.stripes {
		c.stripes[i].ss = spacesaving.New(per)
	}
	return c
}

// count records one operation of tenant.
func (c *loadCounter) count(tenant string) {
	h := hashing.Sum64(tenant)
	s := &c.stripes[h>>61] // the top bits: the bucket hash uses the low ones
	s.mu.Lock()
	s.ss.Add(tenant, h, 1)
	s.ops++
	s.mu.Unlock()
}

// take returns the counts since the last take and starts afresh.
func (c *loadCounter) take() (ops uint64, entries []spacesaving.Entry) {
	for i := range c.stripes {
		s := &c.stripes[i]
		s.mu.Lock()
		ops += s.ops
		s.ss.Each(func(e spacesaving.Entry) { entries = append(entries, e) })
		s.ops = 0
		s.ss.Reset()
		s.mu.Unlock()
	}
	return ops, entries
}

// loadKeys names the load summary's keys in the control Redis, all under one hash tag.
func (k Keys) loadTag() string { return slot.Tagged("", k.prefix()+"load") }

// LoadIndex returns the control-Redis key indexing the published load intervals (ZSET,
// member "<to>:<interval>" in unix ms and ms, score to).
func (k Keys) LoadIndex() string { return k.loadTag() + ":index" }

// LoadInterval returns the control-Redis key of one published load interval (HASH, see
// [ReadTenantLoad]), for the index member "<to>:<interval>".
func (k Keys) LoadInterval(member string) string { return k.loadTag() + ":i:" + member }

// loadLoop publishes the counts of every interval just after it ends, until ctx ends.
// Counts taken before the first boundary cover only part of the first interval.
func (r *Router) loadLoop(ctx context.Context) {
	defer close(r.loadStopped)
	iv := r.o.Load.Interval.Milliseconds()
	if iv == 0 {
		iv = 1
	}
	for {
		now := r.o.Clock().UnixMilli()
		end := (now/iv + 1) * iv
		if !sleep(ctx, time.Duration(min(max(end-now, 1), iv))*time.Millisecond) {
			return
		}
		r.publishLoad(ctx, end-iv, end)
	}
}

// publishLoad adds the counts taken now to the interval [from, to). An interval without
// calls is published too, so that the summary's span is the time the Routers ran and a
// reader's rates are averages over it. A failed report is counted in Stats.LoadErrors and
// its counts are dropped.
func (r *Router) publishLoad(ctx context.Context, from, to int64) {
	ops, entries := r.load.take()
	pctx, cancel := context.WithTimeout(ctx, r.o.FetchTimeout)
	defer cancel()
	if err := r.reportLoad(pctx, from, to, ops, entries); err != nil {
		r.stats.loadErrors.Add(1)
		if r.o.Logger != nil && ctx.Err() == nil {
			r.o.Logger.Warn("routing: load report failed", "err", err)
		}
		return
	}
	r.stats.loadReports.Add(1)
}

func (r *Router) reportLoad(ctx context.Context, from, to int64, ops uint64, entries []spacesaving.Entry) error {
	k := r.store.keys
	member := strconv.FormatInt(to, 10) + ":" + strconv.FormatInt(to-from, 10)
	args := make([]any, 0, 6+3*len(entries))
	args = append(args, r.o.Load.Instance, strconv.FormatInt(from, 10), strconv.FormatInt(to, 10),
		strconv.FormatInt(r.o.Load.Retention.Milliseconds(), 10), strconv.FormatUint(ops, 10), member)
	for _, e := range entries {
		args = append(args, e.Key, strconv.FormatUint(e.Count, 10), strconv.FormatUint(e.Err, 10))
	}
	reply, err := loadScript.Run(ctx, r.store.client, []string{k.LoadInterval(member), k.LoadIndex()}, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("routing: load report: %w", err)
	}
	if len(reply) != 1 || (reply[0] != "ok" && reply[0] != "dup") {
		return fmt.Errorf("routing: load report: unexpected reply %q", reply)
	}
	return nil
}

// sleep waits for d or ctx; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
