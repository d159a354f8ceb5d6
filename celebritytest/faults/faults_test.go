package faults_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

func TestMain(m *testing.M) { celebritytest.Main(m) }

// client returns a client of the shared server whose connections go through in. Its 1s
// timeouts end a blackholed command, and are far above a command's time on a loaded
// machine (with 150ms of injected latency too): a timeout there would fail the command, or
// with retries on, run it once more.
func client(t *testing.T, in *faults.Injector, retries int) *redis.Client {
	return celebritytest.Standalone(t).Client(t, func(o *redis.Options) {
		o.Dialer = in.Dialer(nil)
		o.MaxRetries = retries
		o.ReadTimeout = time.Second
		o.WriteTimeout = time.Second
	})
}

func TestDroppedReplyAfterExecution(t *testing.T) {
	t.Parallel()
	in := faults.New()
	c := client(t, in, -1)
	plain := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	key := celebritytest.NewPrefix(t) + "counter"

	in.DropReply(faults.Match{Command: "incr", Arg: key}, 1)
	err := c.Incr(ctx, key).Err()
	require.ErrorIs(t, err, faults.ErrReplyDropped)
	// The client saw an error, yet the command ran.
	require.Equal(t, "1", plain.Get(ctx, key).Val())
	require.Equal(t, int64(1), in.Dropped())

	// The drop was used up: the next INCR gets its reply.
	require.Equal(t, int64(2), c.Incr(ctx, key).Val())
}

func TestGoRedisRetriesADroppedReply(t *testing.T) {
	// This is why every mutating script must be idempotent: one call, two executions.
	t.Parallel()
	in := faults.New()
	c := client(t, in, 3)
	plain := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	key := celebritytest.NewPrefix(t) + "counter"

	in.DropReply(faults.Match{Command: "INCR", Arg: key}, 1)
	v, err := c.Incr(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, int64(2), v, "the retry executed the command a second time")
	require.Equal(t, "2", plain.Get(ctx, key).Val())
}

func TestDropMatchesOnlyItsCommand(t *testing.T) {
	t.Parallel()
	in := faults.New()
	c := client(t, in, -1)
	ctx := context.Background()
	key := celebritytest.NewPrefix(t) + "k"
	in.DropReply(faults.Match{Command: "INCR", Arg: "some-other-key"}, 1)
	require.NoError(t, c.Incr(ctx, key).Err())
	require.NoError(t, c.Set(ctx, key, "x", 0).Err())
	require.Equal(t, int64(0), in.Dropped())
}

func TestBlackholedConnectionTimesOut(t *testing.T) {
	t.Parallel()
	in := faults.New()
	c := client(t, in, -1)
	plain := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	key := celebritytest.NewPrefix(t) + "k"
	require.NoError(t, c.Ping(ctx).Err())

	in.Blackhole(true)
	err := c.Set(ctx, key, "v", 0).Err()
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a timeout, got %v", err)
	require.Equal(t, int64(0), plain.Exists(ctx, key).Val(), "a blackholed command reached the server")

	in.Blackhole(false)
	require.NoError(t, c.Set(ctx, key, "v", 0).Err())
}

func TestBlackholeOfOneAddressSparesOthers(t *testing.T) {
	t.Parallel()
	shards := celebritytest.Shards(t, 2)
	in := faults.New()
	opt := func(o *redis.Options) {
		o.Dialer = in.Dialer(nil)
		o.MaxRetries = -1
		o.ReadTimeout = time.Second // b's Ping must come back within it
	}
	a, b := shards[0].Client(t, opt), shards[1].Client(t, opt)
	ctx := context.Background()
	in.BlackholeAddr(shards[0].Addr(), true)
	require.Error(t, a.Ping(ctx).Err())
	require.NoError(t, b.Ping(ctx).Err())
}

func TestLatencyDelaysCommands(t *testing.T) {
	t.Parallel()
	in := faults.New()
	c := client(t, in, -1)
	ctx := context.Background()
	require.NoError(t, c.Ping(ctx).Err())
	in.SetLatency(150 * time.Millisecond)
	start := time.Now()
	require.NoError(t, c.Ping(ctx).Err())
	// A lower bound only: latency was added, however slow the machine is.
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

func TestResetClosesLiveConnections(t *testing.T) {
	t.Parallel()
	in := faults.New()
	c := client(t, in, -1)
	ctx := context.Background()
	sub := c.Subscribe(ctx, celebritytest.NewPrefix(t)+"chan")
	defer sub.Close()
	_, err := sub.Receive(ctx)
	require.NoError(t, err)
	dials := in.Dials()

	in.ResetAll()
	// The pub/sub connection broke and go-redis dialed a new one.
	require.Eventually(t, func() bool {
		_, _ = sub.ReceiveTimeout(ctx, 50*time.Millisecond)
		return in.Dials() > dials
	}, 30*time.Second, 10*time.Millisecond)
}

func TestRefusedDials(t *testing.T) {
	t.Parallel()
	in := faults.New()
	c := client(t, in, -1)
	in.RefuseDials(true)
	require.ErrorIs(t, c.Ping(context.Background()).Err(), faults.ErrRefused)
	in.Clear()
	require.NoError(t, c.Ping(context.Background()).Err())
}

func TestDroppedReplyOnCluster(t *testing.T) {
	t.Parallel()
	in := faults.New()
	cl := celebritytest.SharedCluster(t)
	c := cl.Client(t, func(o *redis.ClusterOptions) { o.Dialer = in.Dialer(nil); o.MaxRetries = -1; o.MaxRedirects = -1 })
	ctx := context.Background()
	key := celebritytest.NewPrefix(t) + "{x}counter"
	require.NoError(t, c.Ping(ctx).Err())
	in.DropReply(faults.Match{Command: "INCRBY", Arg: "{x}counter"}, 1)
	require.Error(t, c.IncrBy(ctx, key, 5).Err())
	require.Equal(t, "5", cl.MasterOf(key).Client(t).Get(ctx, key).Val())
}

func TestDroppedScriptReplyWaitsForTheRunThatExecutes(t *testing.T) {
	// On a fresh server a script's first EVALSHA gets NOSCRIPT and nothing runs; the drop must
	// hit the EVAL that follows, or a "lost reply" test would test nothing.
	t.Parallel()
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	in := faults.New()
	c := s.Client(t, func(o *redis.Options) { o.Dialer = in.Dialer(nil); o.MaxRetries = -1 })
	ctx := context.Background()
	incr := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	in.DropReply(faults.Match{Command: "EVALSHA", Arg: "ran"}, 1)
	err := incr.Run(ctx, c, []string{"ran"}).Err()
	require.ErrorIs(t, err, faults.ErrReplyDropped)
	require.Equal(t, "1", s.Client(t).Get(ctx, "ran").Val(), "the script did not run before its reply was dropped")
	require.Equal(t, int64(1), in.Dropped())
	// Later runs go through EVALSHA, now cached, and get their replies.
	require.Equal(t, int64(2), incr.Run(ctx, c, []string{"ran"}).Val())
}
