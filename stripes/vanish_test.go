package stripes

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// deleteKeys deletes every key under prefix on every node behind rc, as a FLUSHALL would
// for this counter, as the administrator (KEYS is not in the package's rule).
func deleteKeys(t testing.TB, rc redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	rc = celebritytest.AdminOf(t, rc)
	del := func(ctx context.Context, n redis.Cmdable) error {
		keys, err := n.Keys(ctx, prefix+"*").Result()
		if err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if err := n.Del(ctx, k).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if cc, ok := rc.(*redis.ClusterClient); ok {
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return del(ctx, m) }))
		return
	}
	require.NoError(t, del(ctx, rc))
}

// addEvents counts n new events in c.
func addEvents(t testing.TB, c *Counter, tag string, n int) {
	t.Helper()
	for i := range n {
		res, err := c.Add(context.Background(), Event{ID: fmt.Sprintf("%s-%d", tag, i), Time: time.Now()}, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
	}
}

// requireVanished checks that every operation of c reports ErrVanished and that none
// recreated the layout record.
func requireVanished(t *testing.T, rc redis.UniversalClient, c *Counter) {
	t.Helper()
	ctx := context.Background()
	_, err := c.Add(ctx, Event{ID: "after-loss", Time: time.Now()}, 1)
	require.ErrorIs(t, err, ErrVanished, "Add")
	require.ErrorIs(t, err, ErrLayout, "ErrVanished is a kind of ErrLayout")
	_, errs := c.AddBatch(ctx, []Addition{{Event{ID: "after-loss-batch", Time: time.Now()}, 1}})
	require.ErrorIs(t, errs[0], ErrVanished, "AddBatch")
	_, err = c.Sum(ctx)
	require.ErrorIs(t, err, ErrVanished, "Sum")
	_, err = c.Resize(ctx, 3)
	require.ErrorIs(t, err, ErrVanished, "Resize")
	n, err := celebritytest.AdminOf(t, rc).Exists(ctx, c.keys.layout()).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the layout record was not recreated")
}

func TestVanishedStateIsReportedNeverRecreated(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		t.Run("everything flushed, seen by this process", func(t *testing.T) {
			c := newCounter(t, rc, Options{Stripes: 4})
			addEvents(t, c, "e", 40)
			deleteKeys(t, rc, c.opts.Prefix)
			requireVanished(t, rc, c)
		})
		t.Run("layout and one stripe lost, fresh process", func(t *testing.T) {
			c := newCounter(t, rc, Options{Stripes: 4})
			addEvents(t, c, "e", 40)
			gd := mustLayout(t, c).gen(1)
			key := c.keys.of(gd, 2)
			require.NoError(t, nodeFor(t, rc, key).Del(ctx, key).Err())
			require.NoError(t, rc.Del(ctx, c.keys.layout()).Err())

			fresh := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 4})
			requireVanished(t, rc, fresh)
			// The process that saw the layout may still count into a surviving stripe
			// through its cached layout; every read and layout change reports the loss.
			_, err := c.Sum(ctx)
			require.ErrorIs(t, err, ErrVanished)
			_, err = c.Resize(ctx, 5)
			require.ErrorIs(t, err, ErrVanished)
			n, err := celebritytest.AdminOf(t, rc).Exists(ctx, c.keys.layout()).Result()
			require.NoError(t, err)
			require.Zero(t, n, "the layout record was not recreated")
		})
		t.Run("one stripe lost", func(t *testing.T) {
			c := newCounter(t, rc, Options{Stripes: 4})
			addEvents(t, c, "e", 40)
			gd := mustLayout(t, c).gen(1)
			key := c.keys.of(gd, 1)
			require.NoError(t, nodeFor(t, rc, key).Del(ctx, key).Err())
			fresh := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 4})
			for _, cnt := range []*Counter{c, fresh} {
				_, err := cnt.Sum(ctx)
				require.ErrorIs(t, err, ErrVanished)
				// An event routed to the lost stripe is refused; it is not counted elsewhere.
				for i := 0; ; i++ {
					ev := Event{ID: fmt.Sprintf("probe-%d", i), Time: time.Now()}
					if stripeOf(newRoute(ev.ID, 63).hash, 4) != 1 {
						continue
					}
					_, err := cnt.Add(ctx, ev, 1)
					require.ErrorIs(t, err, ErrVanished)
					break
				}
			}
		})
		t.Run("layout restored to an older version", func(t *testing.T) {
			c := newCounter(t, rc, Options{Stripes: 2})
			addEvents(t, c, "e", 10)
			old, err := rc.HGetAll(ctx, c.keys.layout()).Result()
			require.NoError(t, err)
			_, err = c.Resize(ctx, 3)
			require.NoError(t, err)
			addEvents(t, c, "f", 10)
			require.NoError(t, rc.Del(ctx, c.keys.layout()).Err())
			require.NoError(t, rc.HSet(ctx, c.keys.layout(), old).Err())
			_, err = c.Sum(ctx)
			require.ErrorIs(t, err, ErrVanished, "a layout older than one seen is refused")
		})
		t.Run("birth record lost, then repaired by the next reader", func(t *testing.T) {
			c := newCounter(t, rc, Options{Stripes: 2})
			addEvents(t, c, "e", 5)
			require.NoError(t, rc.HDel(ctx, c.keys.births(), c.opts.Name).Err())
			reader := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 2})
			require.Equal(t, int64(5), mustSum(t, reader), "the reader writes the birth record again")
			require.NoError(t, rc.Del(ctx, c.keys.layout()).Err())
			fresh := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 2})
			requireVanished(t, rc, fresh)
		})
	})
}

func TestRestartWithoutPersistenceIsReported(t *testing.T) {
	s := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	rc := s.Client(t)
	c := newCounter(t, rc, Options{Stripes: 4})
	addEvents(t, c, "e", 40)
	s.Restart(t) // kill -9; without AOF the server comes back empty
	ctx := context.Background()
	require.Eventually(t, func() bool { return rc.Ping(ctx).Err() == nil }, 30*time.Second, 20*time.Millisecond)
	requireVanished(t, rc, c)
}

func TestBirthRecordLivesOnAnotherMaster(t *testing.T) {
	cl := celebritytest.SharedCluster(t)
	for i := range 200 {
		name := fmt.Sprintf("likes:comment:%d", i)
		k := keys{prefix: celebritytest.Prefix(t), name: name}
		require.NotEqual(t, cl.MasterOf(k.layout()).Addr(), cl.MasterOf(k.births()).Addr(), "counter %q", name)
	}
}

// holdHook holds back the reply of the next HGETALL once armed, until released.
type holdHook struct {
	armed   chan struct{} // closed when a call is being held
	release chan struct{}
	on      atomic.Bool
}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "hgetall" && h.on.CompareAndSwap(true, false) {
			close(h.armed)
			<-h.release
		}
		return err
	}
}

// TestConcurrentLayoutReadsAreNotVanished checks that a layout read which was overtaken by
// a newer read in the same process (its reply held back while the layout changed) is not
// taken for a layout that went back in version.
func TestConcurrentLayoutReadsAreNotVanished(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	h := &holdHook{armed: make(chan struct{}), release: make(chan struct{})}
	rc.AddHook(h)
	c := newCounter(t, rc, Options{Stripes: 2})
	addEvents(t, c, "a", 3)
	h.on.Store(true)
	done := make(chan error, 1)
	go func() { _, err := c.Sum(context.Background()); done <- err }()
	<-h.armed // the Sum read the layout, its reply is held
	_, err := c.Resize(context.Background(), 4)
	require.NoError(t, err)
	require.Equal(t, int64(3), mustSum(t, c))
	close(h.release)
	require.NoError(t, <-done)
}

// TestLayoutCreatedDuringAReadIsNotVanished checks that a read that found no layout record,
// overtaken by a concurrent creation in the same process, is not taken for a lost layout.
func TestLayoutCreatedDuringAReadIsNotVanished(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	h := &holdHook{armed: make(chan struct{}), release: make(chan struct{})}
	rc.AddHook(h)
	c := newCounter(t, rc, Options{Stripes: 2})
	h.on.Store(true)
	done := make(chan error, 1)
	go func() { _, err := c.Add(context.Background(), Event{ID: "held", Time: time.Now()}, 1); done <- err }()
	<-h.armed // the Add found no layout record, its reply is held
	addEvents(t, c, "a", 2)
	close(h.release)
	require.NoError(t, <-done)
	require.Equal(t, int64(3), mustSum(t, c))
}

// A layout record lost while a Seal ran is not brought back by Seal's last write (the
// expiring mark of a folded generation) as a stray hash of one field, which later reads
// took for a damaged layout (ErrLayout) instead of a lost one: the mark is written only into
// an existing record, and Seal reports the loss (found in review).
func TestExpiringMarkDoesNotRecreateALostLayout(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		c := newCounter(t, rc, Options{Stripes: 1})
		addEvents(t, c, "e", 2)
		g := mustLayout(t, c).doc.Gens[0]
		require.NoError(t, c.expireSealed(ctx, g), "marked in the existing record")
		marked, err := rc.HGet(ctx, c.keys.layout(), "expiring:1").Result()
		require.NoError(t, err)
		require.NotEmpty(t, marked)

		require.NoError(t, rc.Del(ctx, c.keys.layout()).Err())
		err = c.expireSealed(ctx, g)
		require.ErrorIs(t, err, ErrVanished)
		n, err := celebritytest.AdminOf(t, rc).Exists(ctx, c.keys.layout()).Result()
		require.NoError(t, err)
		require.Zero(t, n, "no stray layout record")
	})
}
