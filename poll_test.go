package celebrity_test

import (
	"context"
	"errors"
	"sync/atomic"
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
// resubscription's reply dropped) while its other commands work, it polls (every 3 intervals
// while the leader is live) and learns a change by polling; when the subscription is back it
// polls slowly again.
func TestPollsFastOnlyWhilePubSubIsDown(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	o := loopOptions()
	o.Loop.PollInterval = time.Hour
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
	require.Eventually(t, func() bool { return x.Stats().Polls >= polls+5 }, 30*time.Second, 10*time.Millisecond, "polls")
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
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key)
	leader := newCache(t, srv.Client(t), src, p, loopOptions())
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)
	// Intervals are counted by the clock: a heartbeat skipped on a busy machine (two
	// evaluations late and on time, under half an interval apart) would undercount them.
	iv := loopOptions().Loop.ReportInterval
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
	p := celebritytest.NewPrefix(t)
	src := newSource()
	key := p + "celebrity"
	src.bump(key)
	o := readerOptions()
	o.Loop.PollInterval = time.Hour
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

// refuseHeartbeat is a go-redis hook that fails every PUBLISH on one channel before it is
// sent: a leader whose heartbeats never arrive (its scripts' announcements still do).
type refuseHeartbeat struct{ channel string }

func (h refuseHeartbeat) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h refuseHeartbeat) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "publish" && len(args) > 1 && args[1] == h.channel {
			err := errors.New("refused by the test")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h refuseHeartbeat) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLateHeartbeatsDoNotMakeTheFleetPollEveryInterval: the leader is alive (it renews its
// lease every interval) but none of its heartbeats arrives (every instance's heartbeat
// PUBLISH fails, so this holds whoever leads), and no instance hears the hot-set channel. A
// poll that finds another instance's live lease and an unchanged version counts as a
// heartbeat until that lease would expire, so an instance that does not lead polls about once
// per 3 intervals, not every interval: the fleet's polls stay under one per interval for the
// leader and one per 2 intervals for each other instance (counted in wall-clock intervals,
// which a loaded machine's loop can only fall behind). A change is still learned everywhere.
func TestLateHeartbeatsDoNotMakeTheFleetPollEveryInterval(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	o := loopOptions()
	o.Loop.PollInterval = time.Hour
	instance := func() *celebrity.Cache[string] {
		c := srv.Client(t)
		c.AddHook(refuseHeartbeat{channel: p + "hot"})
		return newCache(t, c, src, p, o)
	}
	caches := []*celebrity.Cache[string]{instance()}
	require.Eventually(t, func() bool { return caches[0].Stats().Leader }, 30*time.Second, 10*time.Millisecond)
	for range 6 {
		caches = append(caches, instance())
	}
	polls := func() (n uint64) {
		for _, c := range caches {
			n += c.Stats().Polls
		}
		return n
	}
	// Past every instance's first polls and the 3 silent intervals that follow them.
	from := fullEvaluations(caches)
	require.Eventually(t, func() bool { return fullEvaluations(caches) >= from+10 }, 30*time.Second, 10*time.Millisecond)

	iv := o.Loop.ReportInterval
	polls0, start := polls(), time.Now()
	from = fullEvaluations(caches)
	require.Eventually(t, func() bool { return fullEvaluations(caches) >= from+60 }, 60*time.Second, 10*time.Millisecond)
	polls1, intervals := polls(), uint64(time.Since(start)/iv)+1
	for _, c := range caches {
		require.False(t, c.Stats().PubSubLive, "no heartbeat arrives")
	}
	others := uint64(len(caches) - 1)
	require.LessOrEqual(t, polls1-polls0, intervals+others*(intervals/2+2),
		"%d instances polled %d times in %d intervals", len(caches), polls1-polls0, intervals)

	require.NoError(t, caches[len(caches)-1].Promote(t.Context(), p+"launch"))
	require.Eventually(t, func() bool { return hotEverywhere(caches, p+"launch", true) }, 30*time.Second, 10*time.Millisecond)
}

// TestCutSubscriptionLearnsByPolling: an instance whose subscription to the hot-set channel
// is down (every resubscription's reply dropped) while the leader's heartbeats go on still
// polls about once per 3 intervals (never less than a ninth of the leader's every-interval
// polls in the same run), and applies a promotion made elsewhere by its first poll after it:
// within 4 intervals, the bound the package documents.
func TestCutSubscriptionLearnsByPolling(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.Standalone(t)
	p := celebritytest.NewPrefix(t)
	src := newSource()
	o := loopOptions()
	o.Loop.PollInterval = time.Hour
	leader := newCache(t, srv.Client(t), src, p, o)
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 30*time.Second, 10*time.Millisecond)

	inj := faults.New()
	client := srv.Client(t, func(ro *redis.Options) { ro.Dialer = inj.Dialer(nil) })
	key := p + "launch"
	var x atomic.Pointer[celebrity.Cache[string]]
	applied := make(chan uint64, 1) // x's polls when it applied the promotion
	xo := o
	xo.OnEvent = func(ev celebrity.Event) {
		if ev.Kind == celebrity.EventPromoted && ev.Key == key {
			select {
			case applied <- x.Load().Stats().Polls:
			default:
			}
		}
	}
	x.Store(newCache(t, client, src, p, xo))
	require.Eventually(t, func() bool { return x.Load().Stats().PubSubLive }, 30*time.Second, 10*time.Millisecond)

	inj.DropReply(faults.Match{Command: "SUBSCRIBE", Arg: p + "hot"}, 1<<30)
	inj.ResetAll()
	require.Eventually(t, func() bool { return !x.Load().Stats().PubSubLive }, 30*time.Second, 10*time.Millisecond)

	lead0, x0 := leader.Stats().Polls, x.Load().Stats().Polls
	require.Eventually(t, func() bool { return leader.Stats().Polls >= lead0+45 }, 60*time.Second, 10*time.Millisecond)
	lead1, x1 := leader.Stats().Polls, x.Load().Stats().Polls
	require.GreaterOrEqual(t, x1-x0, (lead1-lead0)/9, "a cut instance keeps polling")

	require.NoError(t, leader.Promote(t.Context(), key))
	polls := x.Load().Stats().Polls
	select {
	case at := <-applied:
		require.LessOrEqual(t, at, polls+1, "applied by the first poll after the promotion")
	case <-time.After(30 * time.Second):
		t.Fatal("the promotion was not applied")
	}
	require.False(t, x.Load().Stats().PubSubLive, "learned by polling, not from the channel")
}
