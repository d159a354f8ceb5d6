package l1cache

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// clientFactory makes a new client of the test's Redis (separate connections each time);
// dial, when set, carries fault injection.
type clientFactory func(t *testing.T, dial faults.DialFunc) Client

// faultTimeout is the clients' dial, read and write timeout: a connection set up while the
// network is blackholed fails after it, as a production client's would after its own.
const faultTimeout = 250 * time.Millisecond

// onBothFleets runs fn on the shared standalone server and on the shared 3-master cluster.
func onBothFleets(t *testing.T, fn func(t *testing.T, newClient clientFactory)) {
	t.Run("standalone", func(t *testing.T) {
		srv := celebritytest.Standalone(t)
		fn(t, func(t *testing.T, dial faults.DialFunc) Client {
			return srv.Client(t, func(o *redis.Options) {
				o.Dialer = dial
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = faultTimeout, faultTimeout, faultTimeout
			})
		})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := celebritytest.SharedCluster(t)
		fn(t, func(t *testing.T, dial faults.DialFunc) Client {
			return cl.Client(t, func(o *redis.ClusterOptions) {
				o.Dialer = dial
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = faultTimeout, faultTimeout, faultTimeout
			})
		})
	})
}

// testPingInterval is the Invalidators' PingInterval in tests: short, so that a silent
// subscription is noticed quickly, but long enough that a loaded machine answers a PING in
// time (an unanswered one counts as a loss).
const testPingInterval = 250 * time.Millisecond

// instance is one simulated service instance: a cache over a shared source, with its own
// Redis client and Invalidator.
type instance struct {
	cache  *Cache[string]
	inv    *Invalidator
	events chan Event // the cache's invalidation events
}

func newInstance(t *testing.T, client Client, src *source, channel string, o Options[string]) *instance {
	t.Helper()
	in := &instance{events: make(chan Event, 1024)}
	o.OnEvent = func(e Event) {
		switch e.Kind {
		case EventInvalidate, EventInvalidateAll, EventMarkAllStale:
			in.events <- e
		}
	}
	in.cache = newCache(t, src.load, o)
	inv, err := NewInvalidator(client, in.cache, InvalidatorOptions{Channel: channel, PingInterval: testPingInterval})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inv.Close()) })
	in.inv = inv
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, inv.Ready(ctx))
	return in
}

// resubscribed waits until the Invalidator has established more than n subscriptions.
func (in *instance) resubscribed(t *testing.T, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return in.inv.Stats().Subscriptions > n }, 20*time.Second, time.Millisecond,
		"no new subscription: %+v", in.inv.Stats())
}

// next waits for the next event of kind (and key, for EventInvalidate), skipping others.
func (in *instance) next(t *testing.T, kind EventKind, key ...string) {
	t.Helper()
	for {
		e := waitFor(t, in.events, kind.String())
		if e.Kind == kind && (len(key) == 0 || e.Key == key[0]) {
			return
		}
	}
}

func TestInvalidationReachesTheOtherInstance(t *testing.T) {
	onBothFleets(t, func(t *testing.T, newClient clientFactory) {
		src := newSource()
		src.set("user:1", "v1")
		channel := celebritytest.NewPrefix(t) + "inv"
		a := newInstance(t, newClient(t, nil), src, channel, Options[string]{Fresh: time.Hour})
		b := newInstance(t, newClient(t, nil), src, channel, Options[string]{Fresh: time.Hour})
		require.Equal(t, "v1", get(t, a.cache, "user:1"))
		require.Equal(t, "v1", get(t, b.cache, "user:1"))

		src.set("user:1", "v2")
		require.NoError(t, a.inv.Invalidate(context.Background(), "user:1"))
		require.Equal(t, "v2", get(t, a.cache, "user:1"), "the local drop is immediate")
		b.next(t, EventInvalidate, "user:1")
		require.Equal(t, "v2", get(t, b.cache, "user:1"))

		// A receives its own message too, and ignores it.
		require.Eventually(t, func() bool { return a.inv.Stats().Ignored == 1 }, 30*time.Second, time.Millisecond)
		require.Equal(t, uint64(1), a.cache.Stats().Invalidations)
		// B's event fires while the message is applied; Received counts it once applied.
		require.Eventually(t, func() bool { return b.inv.Stats().Received == 1 }, 30*time.Second, time.Millisecond)
		require.Equal(t, uint64(1), a.inv.Stats().Published)

		// Keys with spaces and an invalidation of everything.
		require.NoError(t, b.inv.Invalidate(context.Background(), "a key with spaces"))
		a.next(t, EventInvalidate, "a key with spaces")
		require.NoError(t, b.inv.InvalidateAll(context.Background()))
		a.next(t, EventInvalidateAll)
	})
}

func TestMalformedMessagesAreCountedAndIgnored(t *testing.T) {
	srv := celebritytest.Standalone(t)
	src := newSource()
	src.set("k", "v")
	channel := celebritytest.NewPrefix(t) + "inv"
	a := newInstance(t, srv.Client(t), src, channel, Options[string]{Fresh: time.Hour})
	get(t, a.cache, "k")
	pub := srv.Client(t)
	for _, m := range []string{"garbage", "1 k", "1 k b@d k", "1 x abc", "2 k abc k"} {
		require.NoError(t, pub.Publish(context.Background(), channel, m).Err())
	}
	require.Eventually(t, func() bool { return a.inv.Stats().Malformed == 5 }, 30*time.Second, time.Millisecond, "%+v", a.inv.Stats())
	get(t, a.cache, "k")
	require.Equal(t, 1, src.count("k"), "a malformed message invalidates nothing")
}

func TestKilledSubscriberConnectionMarksEntriesStaleWhenBack(t *testing.T) {
	onBothFleets(t, func(t *testing.T, newClient clientFactory) {
		src := newSource()
		src.set("k", "v1")
		channel := celebritytest.NewPrefix(t) + "inv"
		inj := faults.New()
		a := newInstance(t, newClient(t, inj.Dialer(nil)), src, channel, Options[string]{Fresh: time.Hour})
		require.Equal(t, "v1", get(t, a.cache, "k"))
		a.next(t, EventMarkAllStale) // the first subscription
		before := a.inv.Stats()
		require.NotZero(t, before.Subscriptions)

		// The source changes while the subscription is being killed: the invalidation is
		// missed. Once the subscription is back, the old value is not served as fresh. (The
		// counts are relative: on a loaded machine a PING may also go unanswered for two
		// intervals, which is one more loss and subscription.)
		src.set("k", "v2")
		inj.ResetAll()
		a.resubscribed(t, before.Subscriptions)
		s := a.inv.Stats()
		require.Greater(t, s.Losses, before.Losses)
		require.Equal(t, "v2", get(t, a.cache, "k"))
		require.Equal(t, 2, src.count("k"))
	})
}

func TestBlackholedSubscriptionMissesMessagesAndMarksEntriesStaleWhenBack(t *testing.T) {
	onBothFleets(t, func(t *testing.T, newClient clientFactory) {
		src := newSource()
		src.set("k", "v1")
		channel := celebritytest.NewPrefix(t) + "inv"
		inj := faults.New()
		a := newInstance(t, newClient(t, inj.Dialer(nil)), src, channel, Options[string]{Fresh: time.Hour, Stale: time.Hour})
		b := newInstance(t, newClient(t, nil), src, channel, Options[string]{Fresh: time.Hour})
		require.Equal(t, "v1", get(t, a.cache, "k"))
		a.next(t, EventMarkAllStale)

		inj.Blackhole(true)
		// The silent subscription is noticed within two ping intervals.
		require.Eventually(t, func() bool { return a.inv.Stats().Losses == 1 }, 30*time.Second, time.Millisecond)
		src.set("k", "v2")
		require.NoError(t, b.inv.Invalidate(context.Background(), "k")) // lost for a
		inj.Blackhole(false)

		a.resubscribed(t, 1)
		require.Zero(t, a.cache.Stats().Invalidations, "the message was lost, not delivered late")
		// With a Stale window the old value may be served once more, as stale, while it is
		// refreshed; never as fresh.
		hits := a.cache.Stats().Hits
		v := get(t, a.cache, "k")
		require.Equal(t, hits, a.cache.Stats().Hits, "served %q as fresh", v)
		require.Eventually(t, func() bool { return get(t, a.cache, "k") == "v2" }, 30*time.Second, time.Millisecond)
	})
}

func TestNewInvalidatorRejectsBadOptions(t *testing.T) {
	srv := celebritytest.Standalone(t)
	c := newCache(t, newSource().load, Options[string]{})
	for _, tc := range []struct {
		o    InvalidatorOptions
		want string
	}{
		{InvalidatorOptions{InstanceID: "has space"}, `InvalidatorOptions.InstanceID must be 1..64 characters of [A-Za-z0-9._-], got "has space"`},
		{InvalidatorOptions{PingInterval: time.Millisecond}, "InvalidatorOptions.PingInterval must be 10ms..1m0s, got 1ms"},
		{InvalidatorOptions{PingInterval: -time.Second}, "InvalidatorOptions.PingInterval must be 10ms..1m0s, got -1s"},
		{InvalidatorOptions{OfflineFresh: time.Millisecond}, "InvalidatorOptions.OfflineFresh must be 10ms..24h0m0s or negative (off), got 1ms"},
		{InvalidatorOptions{PubSub: 7}, "InvalidatorOptions.PubSub must be PubSubAuto, PubSubGlobal or PubSubSharded, got 7"},
	} {
		_, err := NewInvalidator(srv.Client(t), c, tc.o)
		require.ErrorContains(t, err, "l1cache: "+tc.want)
	}
	_, err := NewInvalidator(nil, c, InvalidatorOptions{})
	require.ErrorContains(t, err, "client must not be nil")
	_, err = NewInvalidator(srv.Client(t), nil, InvalidatorOptions{})
	require.ErrorContains(t, err, "target must not be nil")
}

func TestInvalidatorCloseIsPromptAndIdempotent(t *testing.T) {
	srv := celebritytest.Standalone(t)
	inj := faults.New()
	c := newCache(t, newSource().load, Options[string]{})
	inv, err := NewInvalidator(srv.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) }), c,
		InvalidatorOptions{Channel: celebritytest.NewPrefix(t), PingInterval: time.Minute})
	require.NoError(t, err)
	require.NoError(t, inv.Ready(context.Background()))
	inj.Blackhole(true) // a receive blocked on a silent connection must not delay Close
	closed := make(chan error, 1)
	go func() { closed <- inv.Close() }()
	require.NoError(t, waitFor(t, closed, "Close"))
	require.NoError(t, inv.Close())
	require.ErrorIs(t, inv.Ready(context.Background()), ErrClosed)
	require.False(t, inv.Stats().Subscribed)
}

// logRecorder is a slog handler that keeps the messages it receives.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func TestInvalidatorThatNeverSubscribesSaysSo(t *testing.T) {
	t.Run("wrong address", func(t *testing.T) {
		srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
		client := srv.Client(t)
		srv.Kill() // nothing listens at the address any more
		logs := &logRecorder{}
		c := newCache(t, newSource().load, Options[string]{})
		inv, err := NewInvalidator(client, c, InvalidatorOptions{Channel: celebritytest.NewPrefix(t), PingInterval: testPingInterval, Logger: slog.New(logs)})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, inv.Close()) })

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = inv.Ready(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var opErr *net.OpError
		require.ErrorAs(t, err, &opErr, "Ready names the failed attempt: %v", err)
		s := inv.Stats()
		require.False(t, s.Subscribed)
		require.NotZero(t, s.SubscribeFailures)
		require.Error(t, s.LastError)
		require.True(t, logs.contains("invalidation subscription failed"), "the failure is logged")
	})
	t.Run("closed client", func(t *testing.T) {
		srv := celebritytest.Standalone(t)
		client := srv.Client(t)
		require.NoError(t, client.Close())
		c := newCache(t, newSource().load, Options[string]{})
		inv, err := NewInvalidator(client, c, InvalidatorOptions{Channel: celebritytest.NewPrefix(t), PingInterval: testPingInterval})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, inv.Close()) })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = inv.Ready(ctx)
		require.ErrorIs(t, err, redis.ErrClosed, "Ready returns at once: the client will never subscribe")
		require.NoError(t, ctx.Err())
		require.ErrorIs(t, inv.Stats().LastError, redis.ErrClosed)
	})
}

func TestNoEntryStaysFreshWhileTheSubscriptionIsDown(t *testing.T) {
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	client := srv.Client(t)
	srv.Kill()
	src := newSource()
	src.set("k", "v1")
	c := newCache(t, src.load, Options[string]{Fresh: time.Hour})
	inv, err := NewInvalidator(client, c, InvalidatorOptions{Channel: celebritytest.NewPrefix(t), PingInterval: testPingInterval, OfflineFresh: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inv.Close()) })
	require.Equal(t, "v1", get(t, c, "k"))
	src.set("k", "v2") // an invalidation nobody can receive
	require.Eventually(t, func() bool { return get(t, c, "k") == "v2" }, 30*time.Second, time.Millisecond,
		"with Fresh 1h, the value is reloaded within OfflineFresh while no subscription is live")
	require.NotZero(t, inv.Stats().OfflineMarks)
}

func TestInstancesSharingAnInstanceIDStillInvalidateEachOther(t *testing.T) {
	srv := celebritytest.Standalone(t)
	channel := celebritytest.NewPrefix(t) + "inv"
	src := newSource()
	src.set("k", "v1")
	var instances [2]*instance
	for i := range instances {
		in := &instance{events: make(chan Event, 1024)}
		in.cache = newCache(t, src.load, Options[string]{Fresh: time.Hour, OnEvent: func(e Event) {
			if e.Kind == EventInvalidate {
				in.events <- e
			}
		}})
		inv, err := NewInvalidator(srv.Client(t), in.cache, InvalidatorOptions{Channel: channel, InstanceID: "same", PingInterval: testPingInterval})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, inv.Close()) })
		require.NoError(t, inv.Ready(context.Background()))
		in.inv = inv
		instances[i] = in
	}
	a, b := instances[0], instances[1]
	require.Equal(t, "v1", get(t, a.cache, "k"))
	src.set("k", "v2")
	require.NoError(t, b.inv.Invalidate(context.Background(), "k"))
	b.next(t, EventInvalidate, "k") // b's local drop
	a.next(t, EventInvalidate, "k")
	require.Equal(t, "v2", get(t, a.cache, "k"))
	require.Eventually(t, func() bool { return b.inv.Stats().Ignored == 1 }, 30*time.Second, time.Millisecond, "b still ignores its own message")
	require.Equal(t, uint64(1), a.inv.Stats().DuplicateInstanceIDs)
	require.Equal(t, uint64(1), a.inv.Stats().Received)
}

func TestMessagesOfEarlierReleasesAreUnderstood(t *testing.T) {
	srv := celebritytest.Standalone(t)
	src := newSource()
	src.set("k", "v1")
	channel := celebritytest.NewPrefix(t) + "inv"
	a := newInstance(t, srv.Client(t), src, channel, Options[string]{Fresh: time.Hour})
	get(t, a.cache, "k")
	require.NoError(t, srv.Client(t).Publish(context.Background(), channel, "1 k old-instance k").Err())
	a.next(t, EventInvalidate, "k")
	require.NoError(t, srv.Client(t).Publish(context.Background(), channel, "1 a old-instance").Err())
	a.next(t, EventInvalidateAll)
}
