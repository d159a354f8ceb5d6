package stripes

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxStaleness is ReaderOptions.MaxStaleness when zero.
const DefaultMaxStaleness = time.Minute

// ReaderOptions configure a [Reader].
type ReaderOptions struct {
	// MaxStaleness is the oldest value Value returns. A value older than three quarters of
	// it is still returned, and refreshed in the background. Default: 1m; must not be negative.
	MaxStaleness time.Duration
}

// Reader serves a Counter's Sum from memory, for read storms (a dashboard showing a view
// count). At most one Sum runs at a time (singleflight), so any number of concurrent Value
// calls within one staleness interval cost one Sum. Close waits for a running refresh.
type Reader struct {
	c        *Counter
	maxStale time.Duration
	soft     time.Duration

	mu  sync.Mutex
	val int64
	at  time.Time // when the cached value's Sum started; zero before the first one

	flight   *flight // the running refresh, shared by every caller that waits for it
	closed   bool
	inflight sync.WaitGroup
	refresh  atomic.Uint64
	hits     atomic.Uint64
}

// flight is one shared Sum: done is closed when val and err are set.
type flight struct {
	done chan struct{}
	val  int64
	err  error
}

// ReaderStats is a snapshot of a Reader's activity.
type ReaderStats struct {
	// Refreshes counts Sum calls the Reader made; Hits counts Value calls served from memory.
	Refreshes, Hits uint64
}

// NewReader returns a cached reader of c.
func NewReader(c *Counter, o ReaderOptions) (*Reader, error) {
	if c == nil {
		return nil, invalidf("counter must not be nil")
	}
	if o.MaxStaleness < 0 {
		return nil, invalidf("ReaderOptions.MaxStaleness must not be negative, got %v", o.MaxStaleness)
	}
	if o.MaxStaleness == 0 {
		o.MaxStaleness = DefaultMaxStaleness
	}
	return &Reader{c: c, maxStale: o.MaxStaleness, soft: o.MaxStaleness * 3 / 4}, nil
}

// Value returns the counter's value as of at most MaxStaleness ago. A value younger than
// that is returned at once (and refreshed in the background once older than three quarters
// of MaxStaleness); otherwise Value waits for the one shared Sum, or for ctx. The shared Sum
// runs detached from any caller's ctx, bounded by the Counter's OpTimeout; a failed Sum is
// reported to the callers that waited for it and not cached.
func (r *Reader) Value(ctx context.Context) (int64, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return 0, ErrClosed
	}
	age := r.c.opts.Clock().Sub(r.at)
	if !r.at.IsZero() && age < r.maxStale {
		v := r.val
		if age >= r.soft {
			r.startLocked()
		}
		r.mu.Unlock()
		r.hits.Add(1)
		return v, nil
	}
	f := r.startLocked()
	r.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// startLocked joins the running refresh or starts one. The caller holds r.mu and has
// checked that r is not closed.
func (r *Reader) startLocked() *flight {
	if r.flight != nil {
		return r.flight
	}
	f := &flight{done: make(chan struct{})}
	r.flight = f
	r.inflight.Add(1)
	go r.run(f)
	return f
}

// run performs one shared Sum.
func (r *Reader) run(f *flight) {
	defer r.inflight.Done()
	started := r.c.opts.Clock()
	ctx, cancel := context.WithTimeout(context.Background(), r.c.opts.OpTimeout)
	defer cancel()
	f.val, f.err = r.c.Sum(ctx)
	r.refresh.Add(1)
	r.mu.Lock()
	if f.err == nil && started.After(r.at) {
		r.val, r.at = f.val, started
	}
	r.flight = nil
	r.mu.Unlock()
	close(f.done)
}

// Stats returns a snapshot of the Reader's counters.
func (r *Reader) Stats() ReaderStats {
	return ReaderStats{Refreshes: r.refresh.Load(), Hits: r.hits.Load()}
}

// Close stops new refreshes and waits for a running one. Later Value calls return ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.inflight.Wait()
	return nil
}
