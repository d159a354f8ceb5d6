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
	require.Eventually(t, func() bool { return leader.Stats().Leader }, 10*time.Second, 10*time.Millisecond)

	inj := faults.New()
	client := srv.Client(t, func(ro *redis.Options) { ro.Dialer = inj.Dialer(nil) })
	x := newCache(t, client, src, p, o)
	require.Eventually(t, func() bool { return x.Stats().PubSubLive }, 10*time.Second, 10*time.Millisecond)
	require.False(t, x.Stats().Leader)

	// Live: a change arrives on the channel, and ten heartbeats pass with at most one poll.
	slowPolls := func(what string) {
		t.Helper()
		polls := x.Stats().Polls
		waitEvaluations(t, leader, 4*10) // 10 intervals of the leader (4 evaluations each)
		require.True(t, x.Stats().PubSubLive, what)
		require.LessOrEqual(t, x.Stats().Polls-polls, uint64(1), "%s: polls while the channel is live", what)
	}
	require.NoError(t, leader.Promote(t.Context(), p+"first"))
	require.Eventually(t, func() bool { return hotEverywhere([]*celebrity.Cache[string]{x}, p+"first", true) }, 10*time.Second, 10*time.Millisecond)
	slowPolls("before the cut")

	// Down: the hot-set subscription cannot be re-established; the rest of the client works.
	inj.DropReply(faults.Match{Command: "SUBSCRIBE", Arg: p + "hot"}, 1<<30)
	inj.ResetAll()
	require.Eventually(t, func() bool { return !x.Stats().PubSubLive }, 10*time.Second, 10*time.Millisecond)
	polls := x.Stats().Polls
	require.Eventually(t, func() bool { return x.Stats().Polls >= polls+5 }, 10*time.Second, 10*time.Millisecond, "polls every interval")
	require.NoError(t, leader.Promote(t.Context(), p+"second"))
	require.Eventually(t, func() bool { return hotEverywhere([]*celebrity.Cache[string]{x}, p+"second", true) }, 10*time.Second, 10*time.Millisecond,
		"learned by polling")
	require.False(t, x.Stats().PubSubLive)

	// Back: the subscription returns, and so does slow polling.
	inj.Clear()
	require.Eventually(t, func() bool { return x.Stats().PubSubLive }, 10*time.Second, 10*time.Millisecond)
	slowPolls("after the subscription returned")
}

// waitEvaluations waits until the leader made n more evaluations.
func waitEvaluations(t *testing.T, leader *celebrity.Cache[string], n uint64) {
	t.Helper()
	from := leader.Stats().Evaluations
	require.Eventually(t, func() bool { return leader.Stats().Evaluations >= from+n }, 30*time.Second, 10*time.Millisecond)
}
