package l1cache

import (
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backoff between failed subscription attempts.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// run keeps a subscription to the channel until Close, replacing it whenever it fails.
func (inv *Invalidator) run() {
	defer close(inv.done)
	backoff := time.Duration(0)
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
		if inv.lost(err) {
			backoff = 0 // it worked until now: retry at once
		} else {
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
	// Subscribe dials and sends SUBSCRIBE at once when it can (otherwise the first receive
	// dials again); it ends early when Close cancels ctx.
	ps := inv.client.Subscribe(inv.ctx, inv.opts.Channel)
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.closed {
		_ = ps.Close()
		return nil
	}
	inv.ps = ps
	return ps
}

// receive applies the messages of ps until it fails or stays silent for two PingIntervals.
func (inv *Invalidator) receive(ps *redis.PubSub) error {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(inv.ctx, inv.opts.PingInterval)
		if inv.ctx.Err() != nil {
			return inv.ctx.Err()
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				if err = ps.Ping(inv.ctx); err == nil {
					pinged = true
					continue
				}
			}
			if pinged && err != nil && errors.As(err, &ne) && ne.Timeout() {
				err = errSilent
			}
			return err
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == inv.opts.Channel {
				inv.up()
			}
		case *redis.Message:
			inv.apply(m.Payload)
		}
	}
}

// errSilent reports a subscription that answered neither messages nor a PING.
var errSilent = errors.New("l1cache: subscription silent for two ping intervals")

// up records an established subscription. Invalidations published before it may have been
// missed, so every entry loaded before is marked stale.
func (inv *Invalidator) up() {
	inv.subscriptions.Add(1)
	inv.target.MarkAllStale()
	inv.mu.Lock()
	if !inv.subscribed {
		inv.subscribed = true
		close(inv.ready)
	}
	inv.mu.Unlock()
}

// lost records the end of a subscription and reports whether it had been established.
func (inv *Invalidator) lost(err error) bool {
	inv.mu.Lock()
	was := inv.subscribed
	if was {
		inv.subscribed = false
		inv.ready = make(chan struct{})
	}
	inv.mu.Unlock()
	if was {
		inv.losses.Add(1)
		if inv.opts.Logger != nil {
			inv.opts.Logger.Warn("l1cache: invalidation subscription lost; entries will be marked stale when it is back",
				"channel", inv.opts.Channel, "err", err)
		}
	}
	return was
}

// apply applies one message from the channel.
func (inv *Invalidator) apply(payload string) {
	kind, id, key, ok := parseMessage(payload)
	switch {
	case !ok:
		inv.malformed.Add(1)
		if inv.opts.Logger != nil {
			inv.opts.Logger.Warn("l1cache: malformed invalidation message", "channel", inv.opts.Channel, "len", len(payload))
		}
	case id == inv.opts.InstanceID:
		inv.ignored.Add(1)
	case kind == 'k':
		inv.received.Add(1)
		inv.target.Invalidate(key)
	default:
		inv.received.Add(1)
		inv.target.InvalidateAll()
	}
}
