package l1cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// PubSubClient is the part of a go-redis client an [Invalidator] uses. *redis.Client and
// *redis.ClusterClient implement it; on a cluster, PUBLISH reaches the subscribers of every
// node, so the subscription may sit on any node.
type PubSubClient interface {
	Publish(ctx context.Context, channel string, message any) *redis.IntCmd
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ PubSubClient = (*redis.Client)(nil)
	_ PubSubClient = (*redis.ClusterClient)(nil)
)

// Target is what an [Invalidator] drives. *Cache[V] implements it.
type Target interface {
	// Invalidate drops a key.
	Invalidate(key string)
	// InvalidateAll drops every key.
	InvalidateAll()
	// MarkAllStale ends the freshness of every entry.
	MarkAllStale()
}

var _ Target = (*Cache[int])(nil)

// Invalidator carries invalidations between the instances of a cache over Redis pub/sub. Its
// Invalidate drops keys in the local cache and publishes them; the Invalidator of every other
// instance drops them on receipt (an instance ignores its own messages). It is an optional
// companion of a [Cache]: the cache works without it, and then other instances see a change
// only when their copy leaves Fresh.
//
// Pub/sub delivers at most once: a message published while a subscription is down is lost
// for it. So whenever the subscription is established (the first time and after every loss,
// which a PING silent for two PingIntervals also detects), the Invalidator calls MarkAllStale
// on its target: entries loaded before are served at most as stale from then on. While the
// subscription is down, entries are served as usual, that is at most until the subscription
// is back or their Fresh window ends, whichever comes first.
type Invalidator struct {
	client PubSubClient
	target Target
	opts   InvalidatorOptions

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the subscription loop returned

	mu         sync.Mutex
	ps         *redis.PubSub // current subscription, closed by Close
	closed     bool
	subscribed bool
	ready      chan struct{} // closed while subscribed

	published, publishErrors, received, ignored atomic.Uint64
	malformed, subscriptions, losses            atomic.Uint64
}

// NewInvalidator subscribes to opts.Channel with client in a goroutine owned by the returned
// Invalidator, and applies the invalidations of other instances to target. Call Close to stop
// it. Use [Invalidator.Ready] to wait for the first subscription.
func NewInvalidator(client PubSubClient, target Target, opts InvalidatorOptions) (*Invalidator, error) {
	if client == nil {
		return nil, errors.New("l1cache: NewInvalidator: client must not be nil")
	}
	if target == nil {
		return nil, errors.New("l1cache: NewInvalidator: target must not be nil")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	inv := &Invalidator{client: client, target: target, opts: opts, done: make(chan struct{}), ready: make(chan struct{})}
	inv.ctx, inv.cancel = context.WithCancel(context.Background())
	go inv.run()
	return inv, nil
}

// InstanceID returns the ID this instance puts in its messages.
func (inv *Invalidator) InstanceID() string { return inv.opts.InstanceID }

// Invalidate drops keys from the local cache, then publishes one message per key to the
// other instances. The local drop always happens; a publish error is returned (the other
// instances then keep their copies until Fresh ends). A publish that go-redis retries may
// deliver a message twice, which is harmless.
func (inv *Invalidator) Invalidate(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		inv.target.Invalidate(key)
	}
	for _, key := range keys {
		if err := inv.publish(ctx, keyMessage(inv.opts.InstanceID, key)); err != nil {
			return fmt.Errorf("l1cache: publish invalidation of %q: %w", key, err)
		}
	}
	return nil
}

// InvalidateAll drops every key from the local cache and asks the other instances to do
// the same.
func (inv *Invalidator) InvalidateAll(ctx context.Context) error {
	inv.target.InvalidateAll()
	if err := inv.publish(ctx, allMessage(inv.opts.InstanceID)); err != nil {
		return fmt.Errorf("l1cache: publish invalidation of all keys: %w", err)
	}
	return nil
}

func (inv *Invalidator) publish(ctx context.Context, msg string) error {
	if err := inv.client.Publish(ctx, inv.opts.Channel, msg).Err(); err != nil {
		inv.publishErrors.Add(1)
		return err
	}
	inv.published.Add(1)
	return nil
}

// Ready waits until the subscription is established, ctx is done (its error is returned) or
// the Invalidator is closed (ErrClosed).
func (inv *Invalidator) Ready(ctx context.Context) error {
	inv.mu.Lock()
	ready := inv.ready
	inv.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-inv.done:
		return ErrClosed
	}
}

// InvalidatorStats is a snapshot of an Invalidator's counters.
type InvalidatorStats struct {
	// Published and PublishErrors count the messages this instance sent or failed to send.
	Published, PublishErrors uint64
	// Received counts invalidations from other instances applied to the cache.
	Received uint64
	// Ignored counts this instance's own messages.
	Ignored uint64
	// Malformed counts messages on the channel that were not invalidations.
	Malformed uint64
	// Subscriptions counts the subscriptions established, each followed by MarkAllStale.
	Subscriptions uint64
	// Losses counts subscriptions lost (errors or silence).
	Losses uint64
	// Subscribed says the subscription is established now.
	Subscribed bool
}

// Stats returns a snapshot of the Invalidator's counters.
func (inv *Invalidator) Stats() InvalidatorStats {
	inv.mu.Lock()
	subscribed := inv.subscribed
	inv.mu.Unlock()
	return InvalidatorStats{
		Published: inv.published.Load(), PublishErrors: inv.publishErrors.Load(),
		Received: inv.received.Load(), Ignored: inv.ignored.Load(), Malformed: inv.malformed.Load(),
		Subscriptions: inv.subscriptions.Load(), Losses: inv.losses.Load(), Subscribed: subscribed,
	}
}

// Close stops the subscription and waits for its goroutine. It does not close the client or
// the cache. Close is idempotent and returns nil.
func (inv *Invalidator) Close() error {
	inv.cancel()
	inv.mu.Lock()
	if !inv.closed {
		inv.closed = true
		if inv.ps != nil {
			_ = inv.ps.Close() // unblocks a receive in progress
		}
	}
	inv.mu.Unlock()
	<-inv.done
	inv.mu.Lock()
	if inv.subscribed {
		inv.subscribed = false
		inv.ready = make(chan struct{})
	}
	inv.mu.Unlock()
	return nil
}
