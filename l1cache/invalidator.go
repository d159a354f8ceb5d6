package l1cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client an [Invalidator] uses: publishing and subscribing.
// *redis.Client, *redis.ClusterClient and redis.UniversalClient satisfy it.
type Client interface {
	Publish(ctx context.Context, channel string, message any) *redis.IntCmd
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	SPublish(ctx context.Context, channel string, message any) *redis.IntCmd
	SSubscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = redis.UniversalClient(nil)
)

// PubSubClient is the former name of Client.
//
// Deprecated: use Client.
type PubSubClient = Client

// stateReloader is implemented by *redis.ClusterClient: ReloadState reloads its slot map
// in the background.
type stateReloader interface {
	ReloadState(ctx context.Context)
}

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
// on its target: entries loaded before are served at most as stale from then on. While no
// subscription is live, freshness is bounded by InvalidatorOptions.OfflineFresh: the target
// is marked stale when the loss is noticed and every OfflineFresh until the subscription is
// back.
//
// On Redis Cluster the subscription follows the channel's slot: after a loss or a failed
// attempt the Invalidator asks the client to reload its slot map, so it re-subscribes on the
// new owner once the cluster has promoted one (about the cluster's node timeout after a
// master fails), whatever the client's ClusterStateReloadInterval.
type Invalidator struct {
	client  Client
	target  Target
	opts    InvalidatorOptions
	nonce   string // random per Invalidator: tells its messages from another instance's
	sharded bool
	reload  func(context.Context) // nil unless the client is a cluster client

	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	done    chan struct{} // closed when the subscription loop returned
	offDone chan struct{} // closed when the offline marker returned

	mu         sync.Mutex
	ps         *redis.PubSub // current subscription, closed by Close
	closed     bool
	subscribed bool
	ready      chan struct{} // closed while subscribed
	lastErr    error         // the last failed subscription attempt, nil once subscribed
	fatal      error         // why the loop stopped before Close (a closed client)

	published, publishErrors, received, ignored, duplicates  atomic.Uint64
	malformed, subscriptions, losses, failures, offlineMarks atomic.Uint64
	warnedDuplicate                                          atomic.Bool
}

// NewInvalidator subscribes to opts.Channel with client in a goroutine owned by the returned
// Invalidator, and applies the invalidations of other instances to target. Call Close to stop
// it. Use [Invalidator.Ready] to wait for the first subscription.
func NewInvalidator(client Client, target Target, opts InvalidatorOptions) (*Invalidator, error) {
	if client == nil {
		return nil, invalidf("NewInvalidator: client must not be nil")
	}
	if target == nil {
		return nil, invalidf("NewInvalidator: target must not be nil")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("l1cache: generate the Invalidator's nonce: %w", err)
	}
	inv := &Invalidator{client: client, target: target, opts: opts, nonce: hex.EncodeToString(b[:]),
		done: make(chan struct{}), offDone: make(chan struct{}), ready: make(chan struct{})}
	_, cluster := client.(*redis.ClusterClient)
	inv.sharded = opts.PubSub == PubSubSharded || (opts.PubSub == PubSubAuto && cluster)
	if r, ok := client.(stateReloader); ok {
		inv.reload = r.ReloadState
	}
	inv.ctx, inv.cancel = context.WithCancel(context.Background())
	go inv.run()
	go inv.markWhileOffline()
	return inv, nil
}

// InstanceID returns the ID this instance puts in its messages.
func (inv *Invalidator) InstanceID() string { return inv.opts.InstanceID }

// Invalidate drops keys from the local cache, then publishes one message per key to the
// other instances. The local drop always happens; a publish error is returned (the other
// instances then keep their copies until Fresh ends, or OfflineFresh when their own
// subscription is down). A publish that go-redis retries may deliver a message twice, which
// is harmless.
func (inv *Invalidator) Invalidate(ctx context.Context, keys ...string) error {
	for _, key := range keys {
		inv.target.Invalidate(key)
	}
	for _, key := range keys {
		if err := inv.publish(ctx, keyMessage(inv.opts.InstanceID, inv.nonce, key)); err != nil {
			return fmt.Errorf("l1cache: publish invalidation of %q: %w", key, err)
		}
	}
	return nil
}

// InvalidateAll drops every key from the local cache and asks the other instances to do
// the same.
func (inv *Invalidator) InvalidateAll(ctx context.Context) error {
	inv.target.InvalidateAll()
	if err := inv.publish(ctx, allMessage(inv.opts.InstanceID, inv.nonce)); err != nil {
		return fmt.Errorf("l1cache: publish invalidation of all keys: %w", err)
	}
	return nil
}

func (inv *Invalidator) publish(ctx context.Context, msg string) error {
	_, err := bound.Do(ctx, func() (int64, error) {
		if inv.sharded {
			return inv.client.SPublish(ctx, inv.opts.Channel, msg).Result()
		}
		return inv.client.Publish(ctx, inv.opts.Channel, msg).Result()
	})
	if err != nil {
		inv.publishErrors.Add(1)
		if inv.reload != nil {
			inv.reload(ctx) // the channel's node may have failed over: look again
		}
		return err
	}
	inv.published.Add(1)
	return nil
}

// Ready waits until the subscription is established. When ctx is done first it returns an
// error wrapping ctx's error and, if an attempt failed, that attempt's error (a wrong
// address, a refused dial). When the client is closed it returns an error wrapping
// redis.ErrClosed at once; after Close, ErrClosed.
func (inv *Invalidator) Ready(ctx context.Context) error {
	inv.mu.Lock()
	ready := inv.ready
	inv.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		inv.mu.Lock()
		last := inv.lastErr
		inv.mu.Unlock()
		if last != nil {
			return fmt.Errorf("l1cache: invalidation channel %q not subscribed (last attempt: %w): %w", inv.opts.Channel, last, ctx.Err())
		}
		return ctx.Err()
	case <-inv.done:
		inv.mu.Lock()
		fatal := inv.fatal
		inv.mu.Unlock()
		if fatal != nil {
			return fmt.Errorf("l1cache: invalidation channel %q cannot be subscribed: %w", inv.opts.Channel, fatal)
		}
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
	// DuplicateInstanceIDs counts messages from another instance using this instance's
	// InstanceID. They are applied (the nonce tells them apart), but the IDs no longer
	// identify the instances in logs.
	DuplicateInstanceIDs uint64
	// Malformed counts messages on the channel that were not invalidations.
	Malformed uint64
	// Subscriptions counts the subscriptions established, each followed by MarkAllStale.
	Subscriptions uint64
	// SubscribeFailures counts subscription attempts that failed before being established.
	SubscribeFailures uint64
	// Losses counts subscriptions lost (errors, silence or an unsubscription by the server).
	Losses uint64
	// OfflineMarks counts the MarkAllStale calls made while no subscription was live.
	OfflineMarks uint64
	// Subscribed says the subscription is established now.
	Subscribed bool
	// Sharded says the Invalidator uses sharded pub/sub (SSUBSCRIBE/SPUBLISH).
	Sharded bool
	// LastError is the error of the last failed subscription attempt while none is
	// established (nil while subscribed), or why the Invalidator stopped trying.
	LastError error
}

// Stats returns a snapshot of the Invalidator's counters.
func (inv *Invalidator) Stats() InvalidatorStats {
	inv.mu.Lock()
	subscribed, last := inv.subscribed, inv.lastErr
	if inv.fatal != nil {
		last = inv.fatal
	}
	inv.mu.Unlock()
	return InvalidatorStats{
		Published: inv.published.Load(), PublishErrors: inv.publishErrors.Load(),
		Received: inv.received.Load(), Ignored: inv.ignored.Load(),
		DuplicateInstanceIDs: inv.duplicates.Load(), Malformed: inv.malformed.Load(),
		Subscriptions: inv.subscriptions.Load(), SubscribeFailures: inv.failures.Load(),
		Losses: inv.losses.Load(), OfflineMarks: inv.offlineMarks.Load(),
		Subscribed: subscribed, Sharded: inv.sharded, LastError: last,
	}
}

// Close stops the subscription and waits for the Invalidator's goroutines. It does not close
// the client or the cache. Close is idempotent and returns nil.
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
	<-inv.offDone
	inv.mu.Lock()
	if inv.subscribed {
		inv.subscribed = false
		inv.ready = make(chan struct{})
	}
	inv.mu.Unlock()
	return nil
}
