package celebrity_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// refuseScript is a go-redis hook that fails every call of one script (EVALSHA by its SHA,
// EVAL by its text) before it is sent: an instance that cannot read the hot set.
type refuseScript struct {
	sha, text string
	refused   atomic.Int64
}

func (h *refuseScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *refuseScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd) {
			h.refused.Add(1)
			err := errors.New("refused by the test")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *refuseScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *refuseScript) match(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	s, _ := args[1].(string)
	switch cmd.Name() {
	case "evalsha", "evalsha_ro":
		return s == h.sha
	case "eval", "eval_ro":
		return s == h.text
	}
	return false
}

// TestAnnouncementCarriesTheChange: an instance that cannot read the hot set (every call of
// its read script fails) still applies a promotion and a demotion made through another
// instance, with the record that decided them, because the announcement on the hot-set
// channel carries the change itself. The key holds the announcement's separators, a newline
// and bytes that are not UTF-8: it arrives unchanged.
func TestAnnouncementCarriesTheChange(t *testing.T) {
	text, err := os.ReadFile("internal/fleet/learn.lua")
	require.NoError(t, err)
	sum := sha1.Sum(text)
	deployments(t, func(t *testing.T, d deployment) {
		p := celebritytest.NewPrefix(t)
		src := newSource()
		key := p + "a|1|2|3:x\nd\xff"
		a := newCache(t, d.client(t), src, p, loopOptions())
		hook := &refuseScript{sha: hex.EncodeToString(sum[:]), text: string(text)}
		cl := d.client(t)
		cl.AddHook(hook)
		rec := &recorder{}
		o := loopOptions()
		o.OnEvent = rec.add
		b := newCache(t, cl, src, p, o)
		// Both hear the leader's heartbeat: their subscriptions are live.
		require.Eventually(t, func() bool { return a.Stats().PubSubLive && b.Stats().PubSubLive },
			30*time.Second, 10*time.Millisecond)

		require.NoError(t, a.Promote(t.Context(), key))
		require.Eventually(t, func() bool { return slices.Equal(b.Hot(), []string{key}) }, 30*time.Second, 10*time.Millisecond)
		n, ev := rec.count(celebrity.EventPromoted, key)
		require.Equal(t, 1, n)
		require.True(t, ev.Manual)
		require.False(t, ev.Decided.IsZero(), "the decision's moment travels with the change")
		require.Equal(t, a.Stats().HotVersion, ev.HotVersion)

		require.NoError(t, a.Demote(t.Context(), key))
		require.Eventually(t, func() bool { return len(b.Hot()) == 0 }, 30*time.Second, 10*time.Millisecond)
		n, ev = rec.count(celebrity.EventDemoted, key)
		require.Equal(t, 1, n)
		require.False(t, ev.Decided.IsZero())
		require.Equal(t, a.Stats().HotVersion, b.Stats().HotVersion)
	})
}
