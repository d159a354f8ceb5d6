package l1cache

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backoff between failed subscription attempts, and how often a streak of failures is
// logged after its first.
const (
	minBackoff      = 10 * time.Millisecond
	maxBackoff      = time.Second
	failureLogEvery = 30 * time.Second
)

// run keeps a subscription to the channel until Close, replacing it whenever it fails.
func (inv *Invalidator) run() {
	defer close(inv.done)
	backoff := time.Duration(0)
	var loggedAt time.Time // when the current streak of failures was last logged
	for {
		ps := inv.subscribe()
		if ps == nil {
			return // closed
		}
		err := inv.receive(ps)
		_ = ps.Close()
		if inv.ctx.Err() != nil {
			return
		}
		if inv.reload != nil {
			// The channel's slot may have a new owner (failover, migration): reload the slot
			// map now rather than after the client's ClusterStateReloadInterval.
			inv.reload(inv.ctx)
		}
		if inv.lost(err) {
			backoff, loggedAt = 0, time.Time{} // it worked until now: retry at once
		} else {
			if errors.Is(err, redis.ErrClosed) {
				inv.stop(err)
				return
			}
			loggedAt = inv.failed(err, loggedAt)
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
		}
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-inv.ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// subscribe opens a new subscription, or returns nil after Close.
func (inv *Invalidator) subscribe() *redis.PubSub {
	// Subscribe dials and sends the subscription at once when it can (otherwise the first
	// receive dials again); the attempt is bounded by two PingIntervals whatever the
	// client's timeouts, and ends early when Close cancels inv.ctx.
	ctx, cancel := context.WithTimeout(inv.ctx, 2*inv.opts.PingInterval)
	var ps *redis.PubSub
	if inv.sharded {
		ps = inv.client.SSubscribe(ctx, inv.opts.Channel)
	} else {
		ps = inv.client.Subscribe(ctx, inv.opts.Channel)
	}
	cancel()
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.closed {
		_ = ps.Close()
		return nil
	}
	inv.ps = ps
	return ps
}

// errSilent reports a subscription that answered neither messages nor a PING.
var errSilent = errors.New("l1cache: subscription silent for two ping intervals")

// errUnsubscribed reports a subscription ended by the server (a shard channel's slot moved).
var errUnsubscribed = errors.New("l1cache: the server ended the subscription")

// receive applies the messages of ps until it fails or stays silent for two PingIntervals.
func (inv *Invalidator) receive(ps *redis.PubSub) error {
	pinged := false
	for {
		// A receive may dial again: bound it as the first attempt is bounded.
		ctx, cancel := context.WithTimeout(inv.ctx, 2*inv.opts.PingInterval)
		msg, err := ps.ReceiveTimeout(ctx, inv.opts.PingInterval)
		cancel()
		if inv.ctx.Err() != nil {
			return inv.ctx.Err()
		}
		if err != nil {
			var ne net.Error
			timeout := (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded)
			if timeout && !pinged {
				if err = ps.Ping(inv.ctx); err == nil {
					pinged = true
					continue
				}
			}
			if pinged && timeout {
				err = errSilent
			}
			return err
		}
		pinged = false
		if err := inv.handle(msg); err != nil {
			return err
		}
	}
}

// handle handles one message of the subscription: it records an established subscription,
// applies an invalidation, and returns errUnsubscribed when the server ended the subscription.
func (inv *Invalidator) handle(msg any) error {
	switch m := msg.(type) {
	case *redis.Subscription:
		if m.Channel != inv.opts.Channel {
			return nil
		}
		switch m.Kind {
		case "subscribe", "ssubscribe":
			inv.up()
		case "unsubscribe", "sunsubscribe":
			return errUnsubscribed
		}
	case *redis.Message:
		inv.apply(m.Payload)
	case *redis.Pong:
	}
	return nil
}

// isSubscribed reports whether the current subscription is established.
func (inv *Invalidator) isSubscribed() bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.subscribed
}

// up records an established subscription. Invalidations published before it may have been
// missed, so every entry loaded before is marked stale.
func (inv *Invalidator) up() {
	inv.subscriptions.Add(1)
	inv.target.MarkAllStale()
	inv.mu.Lock()
	inv.lastErr = nil
	if !inv.subscribed {
		inv.subscribed = true
		close(inv.ready)
	}
	inv.mu.Unlock()
}

// lost records the end of a subscription and reports whether it had been established. The
// entries loaded while it was live are marked stale at once: invalidations may be missed
// from now on.
func (inv *Invalidator) lost(err error) bool {
	inv.mu.Lock()
	was := inv.subscribed
	if was {
		inv.subscribed = false
		inv.ready = make(chan struct{})
	}
	inv.mu.Unlock()
	if !was {
		return false
	}
	inv.losses.Add(1)
	if inv.opts.OfflineFresh > 0 {
		inv.offlineMarks.Add(1)
		inv.target.MarkAllStale()
	}
	if inv.opts.Logger != nil {
		inv.opts.Logger.Warn("l1cache: invalidation subscription lost; entries are marked stale until it is back",
			"channel", inv.opts.Channel, "err", err)
	}
	return true
}

// failed records a subscription attempt that failed before being established and logs it:
// the first failure of a streak at once, then at most once per failureLogEvery. It returns
// when the streak was last logged.
func (inv *Invalidator) failed(err error, loggedAt time.Time) time.Time {
	inv.failures.Add(1)
	inv.mu.Lock()
	inv.lastErr = err
	inv.mu.Unlock()
	if inv.opts.Logger == nil || (!loggedAt.IsZero() && time.Since(loggedAt) < failureLogEvery) {
		return loggedAt
	}
	inv.opts.Logger.Warn("l1cache: invalidation subscription failed; retrying",
		"channel", inv.opts.Channel, "failures", inv.failures.Load(), "err", err)
	return time.Now()
}

// stop records that the loop cannot go on (the client is closed).
func (inv *Invalidator) stop(err error) {
	inv.failures.Add(1)
	inv.mu.Lock()
	inv.fatal, inv.lastErr = err, err
	inv.mu.Unlock()
	if inv.opts.Logger != nil {
		inv.opts.Logger.Error("l1cache: invalidation subscription stopped: the Redis client is closed",
			"channel", inv.opts.Channel, "err", err)
	}
}

// markWhileOffline marks the target stale every OfflineFresh while no subscription is live.
func (inv *Invalidator) markWhileOffline() {
	defer close(inv.offDone)
	if inv.opts.OfflineFresh < 0 {
		return
	}
	t := time.NewTicker(inv.opts.OfflineFresh)
	defer t.Stop()
	for {
		select {
		case <-inv.ctx.Done():
			return
		case <-t.C:
			if !inv.isSubscribed() {
				inv.offlineMarks.Add(1)
				inv.target.MarkAllStale()
			}
		}
	}
}

// apply applies one message from the channel.
func (inv *Invalidator) apply(payload string) {
	m, ok := parseMessage(payload)
	switch {
	case !ok:
		inv.malformed.Add(1)
		if inv.opts.Logger != nil {
			inv.opts.Logger.Warn("l1cache: malformed invalidation message", "channel", inv.opts.Channel, "len", len(payload))
		}
		return
	case m.id == inv.opts.InstanceID && m.nonce == inv.nonce:
		inv.ignored.Add(1)
		return
	case m.id == inv.opts.InstanceID:
		// Another process uses this InstanceID: its invalidations still apply.
		inv.duplicates.Add(1)
		if inv.opts.Logger != nil && inv.warnedDuplicate.CompareAndSwap(false, true) {
			inv.opts.Logger.Warn("l1cache: another instance publishes invalidations with this InstanceID; they are applied, but InstanceIDs should be unique",
				"channel", inv.opts.Channel, "instance_id", m.id)
		}
	}
	if m.kind == 'k' {
		inv.target.Invalidate(m.key)
	} else {
		inv.target.InvalidateAll()
	}
	// Counted once applied, as Stats.Received says: a reader that saw the count move also
	// sees the entry invalidated.
	inv.received.Add(1)
}
