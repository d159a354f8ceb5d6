package routing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// watch is the Router's one background goroutine: it fetches the table at start, on every
// announcement of a newer generation, every PollInterval, and every RetryInterval while
// callers wait for a newer table.
func (r *Router) watch(ctx context.Context, control Control) {
	defer close(r.stopped)
	sub := control.Subscribe(ctx, r.store.keys.Channel())
	defer func() { _ = sub.Close() }()
	msgs := sub.Channel()
	tick := time.NewTicker(min(r.o.RetryInterval, r.o.PollInterval))
	defer tick.Stop()
	r.fetchShared(ctx)
	lastPoll := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			g, err := strconv.ParseUint(m.Payload, 10, 64)
			if err != nil || g <= r.Generation() {
				r.stats.ignoredAnnouncements.Add(1)
				continue
			}
			r.fetchShared(ctx)
		case now := <-tick.C:
			waiting := r.waiters.Load() > 0 && now.Sub(r.lastFetch()) >= r.o.RetryInterval
			if waiting || now.Sub(lastPoll) >= r.o.PollInterval {
				lastPoll = now
				r.fetchShared(ctx)
			}
		}
	}
}

// fetchShared runs one fetch, joining one already in flight, and waits for it or ctx.
func (r *Router) fetchShared(ctx context.Context) {
	ch := r.sf.DoChan("fetch", func() (any, error) { return nil, r.fetch(ctx) })
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// fetch loads the current table from the control Redis and installs it if newer. It runs on
// ctx without its cancellation (the work is shared), bounded by FetchTimeout and Close.
func (r *Router) fetch(ctx context.Context) error {
	n := r.starts.Add(1)
	defer r.complete(n)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.FetchTimeout)
	defer cancel()
	go func() {
		select {
		case <-r.closing:
			cancel()
		case <-fctx.Done():
		}
	}()
	r.stats.fetches.Add(1)
	t, err := r.store.Load(fctx)
	if err == nil {
		_, err = r.install(t)
	}
	if err != nil {
		if !errors.Is(err, ErrNoTable) {
			r.stats.fetchErrors.Add(1)
			if r.o.Logger != nil {
				r.o.Logger.Warn("routing: table fetch failed", "err", err)
			}
		}
		r.lastErr.Store(&err)
		return err
	}
	r.lastErr.Store(nil)
	return nil
}

// complete records that the fetch with start number n finished and wakes the waiters.
func (r *Router) complete(n uint64) {
	for {
		d := r.done.Load()
		if d >= n || r.done.CompareAndSwap(d, n) {
			break
		}
	}
	r.lastFetchNanos.Store(time.Now().UnixNano())
	r.mu.Lock()
	close(r.signal)
	r.signal = make(chan struct{})
	r.mu.Unlock()
}

func (r *Router) lastFetch() time.Time { return time.Unix(0, r.lastFetchNanos.Load()) }

// Await returns once the Router has a table of generation >= min, and that generation.
//
// Callers that find their route stale at the same time share fetches: a caller starts a
// fetch only if no fetch that began after it looked has completed yet, and joins a fetch in
// flight; while callers wait, the watcher polls every RetryInterval and wakes them on every
// completed fetch. Await leaves on ctx (bounded by Options.AwaitTimeout when ctx has no
// deadline) with an error that wraps ctx.Err() and names the last fetch error, or with
// ErrClosed when the Router closes. It never returns an older table.
func (r *Router) Await(ctx context.Context, min uint64) (uint64, error) {
	if min == 0 {
		min = 1
	}
	if g := r.Generation(); g >= min {
		return g, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.AwaitTimeout)
		defer cancel()
	}
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	return r.waitFor(ctx, min)
}

// waitFor waits for a table of generation min or newer: it joins (or starts) one fetch if
// none completed since it began, then wakes on every completed fetch, until ctx ends or the
// Router closes.
func (r *Router) waitFor(ctx context.Context, min uint64) (uint64, error) {
	fetched := false
	for {
		seen := r.starts.Load()
		r.mu.Lock()
		wake := r.signal
		r.mu.Unlock()
		if g := r.Generation(); g >= min {
			return g, nil
		}
		if !fetched && r.done.Load() <= seen {
			fetched = true
			ch := r.sf.DoChan("fetch", func() (any, error) { return nil, r.fetch(ctx) })
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return 0, r.awaitErr(ctx, min)
			case <-r.closing:
				return 0, ErrClosed
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, r.awaitErr(ctx, min)
		case <-r.closing:
			return 0, ErrClosed
		}
	}
}

func (r *Router) awaitErr(ctx context.Context, min uint64) error {
	last := ""
	if p := r.lastErr.Load(); p != nil {
		last = "; last fetch: " + (*p).Error()
	}
	return fmt.Errorf("routing: no table of generation >= %d (have %d)%s: %w", min, r.Generation(), last, ctx.Err())
}
