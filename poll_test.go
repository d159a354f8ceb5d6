package celebrity_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// TestPollsFastOnlyWhilePubSubIsDown: an instance that hears the leader's heartbeat polls the
// hot set only every PollInterval (here an hour: not at all during the test) and learns
// changes from the channel; once its subscription to the hot-set channel is lost (every
// resubscription's reply dropped) while its other commands work, it polls every interval and
// learns a change by polling; when the subscription is back it polls slowly again.
func TestPollsFastOnlyWhilePubSubIsDown(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.Prefix(t)
	src := newSource()
	o := loopOptions()
	o.PollInterval = time.Hour
	leader := newCache(t, srv.Client(t), src, p, o)
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)

	inj := faults.New()
	client := srv.Client(t, func(ro *redis.Options) { ro.Dialer = inj.Dialer(nil) })
	x := newCache(t, client, src, p, o)
	require.Eventually(t, func() bool { return x.Stats().PubSubLive }, 30*time.Second, 10*time.Millisecond)
	require.False(t, x.Stats().Leader)

	// Live: a change arrives on the channel, and twenty intervals pass with a few polls at
	// most (a heartbeat delayed 3 intervals by a loaded machine costs one), not twenty.
	slowPolls := func(what string) {
		t.Helper()
		polls := x.Stats().Polls
		waitHeartbeats(t, leader, 20)
		require.LessOrEqual(t, x.Stats().Polls-polls, uint64(5), "%s: polls while the channel is live", what)
	}
	require.NoError(t, leader.Promote(t.Context(), p+"first"))
	require.Eventually(t, func() bool { return hotEverywhere([]*celebrity.Cache[string]{x}, p+"first", true) }, 30*time.Second, 10*time.Millisecond)
	slowPolls("before the cut")

	// Down: the hot-set subscription cannot be re-established; the rest of the client works.
	inj.DropReply(faults.Match{Command: "SUBSCRIBE", Arg: p + "hot"}, 1<<30)
	inj.ResetAll()
	require.Eventually(t, func() bool { return !x.Stats().PubSubLive }, 30*time.Second, 10*time.Millisecond)
	polls := x.Stats().Polls
	require.Eventually(t, func() bool { return x.Stats().Polls >= polls+5 }, 30*time.Second, 10*time.Millisecond, "polls every interval")
	require.NoError(t, leader.Promote(t.Context(), p+"second"))
	require.Eventually(t, func() bool { return hotEverywhere([]*celebrity.Cache[string]{x}, p+"second", true) }, 30*time.Second, 10*time.Millisecond,
		"learned by polling")
	require.False(t, x.Stats().PubSubLive)

	// Back: the subscription returns, and so does slow polling.
	inj.Clear()
	require.Eventually(t, func() bool { return x.Stats().PubSubLive }, 30*time.Second, 10*time.Millisecond)
	slowPolls("after the subscription returned")
}

// waitHeartbeats waits until the leader published n more times (a heartbeat per interval).
func waitHeartbeats(t *testing.T, leader *celebrity.Cache[string], n uint64) {
	t.Helper()
	from := leader.Stats().Heartbeats
	require.Eventually(t, func() bool { return leader.Stats().Heartbeats >= from+n }, 60*time.Second, 10*time.Millisecond)
}

// TestLeaderEvaluatesOnlyWhatMayChange: with no key near PromoteRate no report nudges the
// leader, so it sums the summary once per interval (the interval that ended), not every
// quarter interval; a key crossing PromoteRate nudges it, and the key is promoted.
func TestLeaderEvaluatesOnlyWhatMayChange(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.Prefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key)
	leader := newCache(t, srv.Client(t), src, p, loopOptions())
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)
	// Intervals are counted by the clock: a heartbeat skipped on a busy machine (two
	// evaluations late and on time, under half an interval apart) would undercount them.
	iv := loopOptions().ReportInterval
	before, from := leader.Stats(), time.Now().UnixNano()/int64(iv)
	waitHeartbeats(t, leader, 10)
	after, to := leader.Stats(), time.Now().UnixNano()/int64(iv)
	require.LessOrEqual(t, after.Evaluations-before.Evaluations, uint64(to-from)+2,
		"one evaluation per interval while idle")

	caches := []*celebrity.Cache[string]{leader}
	for range 2 {
		caches = append(caches, newCache(t, srv.Client(t), src, p, readerOptions()))
	}
	readers(t, caches, key)
	require.Eventually(t, func() bool { return hotEverywhere(caches, key, true) }, 30*time.Second, 10*time.Millisecond)
}

// TestNudgesDoNotHideALostLeader: the leader is gone while a key gets hot. The reports'
// nudges keep arriving on the hot-set channel, but only the leader's heartbeat and
// announcements count as a live channel, so the survivors poll, one takes the lease over and
// promotes the key, though PollInterval is an hour.
func TestNudgesDoNotHideALostLeader(t *testing.T) {
	srv := celebritytest.Standalone(t)
	p := celebritytest.Prefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key)
	o := readerOptions()
	o.PollInterval = time.Hour
	leader := newCache(t, srv.Client(t), src, p, o)
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)
	var others []*celebrity.Cache[string]
	for range 2 {
		others = append(others, newCache(t, srv.Client(t), src, p, o))
	}
	for _, c := range others {
		require.Eventually(t, func() bool { return c.Stats().PubSubLive }, 30*time.Second, 10*time.Millisecond)
	}
	require.NoError(t, leader.Close())
	readers(t, others, key)
	require.Eventually(t, func() bool { return hotEverywhere(others, key, true) }, 30*time.Second, 10*time.Millisecond)
}
