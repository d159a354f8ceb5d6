package migrate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// hold is a go-redis hook that holds back the first script call carrying an argument that
// contains arg, until release is called: a caller paused just before that write.
type hold struct {
	arg      string
	once     sync.Once
	reached  chan struct{}
	released chan struct{}
}

func newHold(arg string) *hold {
	return &hold{arg: arg, reached: make(chan struct{}), released: make(chan struct{})}
}

func (h *hold) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *hold) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *hold) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			for _, a := range cmd.Args()[1:] {
				if s, ok := a.(string); ok && strings.Contains(s, h.arg) {
					held := false
					h.once.Do(func() { held = true })
					if held {
						close(h.reached)
						select {
						case <-h.released:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					break
				}
			}
		}
		return next(ctx, cmd)
	}
}

func (h *hold) wait(t testing.TB) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the held call was never made")
	}
}

// A Cleanup paused just before deleting the source's copy, overtaken by a later caller
// with a newer epoch of the unit, is refused by the source's script (and changes nothing).
func TestPausedCleanupIsFencedByALaterEpoch(t *testing.T) {
	srv := celebritytest.Shards(t, 3)
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
		"a": srv[1].Client(t), "b": srv[2].Client(t),
	}, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(12)
	require.Equal(t, "b", e.openOwner(u))
	m := newModel()
	m.seed(t, e.client(), u, 30)
	co := e.coordinator(migrate.Options{Grace: time.Nanosecond})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.NoError(t, err)

	h := newHold(migrate.ScriptHashes()["cleanup"])
	held := srv[2].Client(t)
	held.AddHook(h)
	paused, err := migrate.New(e.control, migrate.Options{Prefix: e.prefix, Grace: time.Nanosecond,
		Shards: map[string]migrate.ShardClient{"a": e.clients["a"], "b": held}})
	require.NoError(t, err)
	// Warm the script on b so the paused call is an EVALSHA carrying the hash.
	require.NoError(t, held.ScriptLoad(ctx, migrate.CleanupSource).Err())
	done := make(chan error, 1)
	go func() { _, err := paused.Cleanup(ctx, st.ID); done <- err }()
	h.wait(t)

	// A later caller takes a newer epoch of the unit and acts on the source.
	later, err := co.Cleanup(ctx, st.ID)
	require.NoError(t, err)
	require.True(t, later.Cleaned)
	close(h.released)
	err = <-done
	require.ErrorIs(t, err, migrate.ErrFenced, "the paused cleanup is refused")
	require.Zero(t, e.dataKeys("b", u))
	m.check(t, e, "a", u)
}

// A cache Rollback paused just before publishing the flip back races a Finish; whichever
// wins, the journal and the table agree afterwards: a Finish cannot end a move as flipped
// while its rollback is being published, and a paused Finish cannot end it after a
// rollback took over.
func TestCacheRollbackAndFinishRacingLeaveJournalAndTableInAgreement(t *testing.T) {
	for _, paused := range []string{"rollback", "finish"} {
		t.Run(paused+" paused", func(t *testing.T) {
			srv := celebritytest.Shards(t, 3)
			e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
				"a": srv[1].Client(t), "b": srv[2].Client(t),
			}, routing.ShardOptions{})
			ctx := testkit.Ctx(t)
			mv, err := migrate.NewCache(e.control, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix})
			require.NoError(t, err)
			tenant := fmt.Sprintf("%s-race", e.prefix)
			src := e.table().BucketOwner(uint32(hashing.Bucket(tenant, testBuckets)))
			dst := other(src)
			st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: tenant, Target: dst})
			require.NoError(t, err)

			arg := routing.Keys{Prefix: e.prefix}.Channel() // the publication's argument
			if paused == "finish" {
				arg = string(migrate.CacheDone)
			}
			h := newHold(arg)
			ctl := srv[0].Client(t)
			ctl.AddHook(h)
			slow, err := migrate.NewCache(ctl, migrate.CacheOptions{Shards: cacheShards(e), Prefix: e.prefix})
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				var err error
				if paused == "rollback" {
					_, err = slow.Rollback(ctx, st.ID)
				} else {
					_, err = slow.Finish(ctx, st.ID)
				}
				done <- err
			}()
			h.wait(t)
			var ferr error
			if paused == "rollback" {
				_, ferr = mv.Finish(ctx, st.ID)
			} else {
				_, ferr = mv.Rollback(ctx, st.ID)
			}
			close(h.released)
			perr := <-done
			t.Logf("paused %s: %v; other: %v", paused, perr, ferr)
			require.False(t, perr == nil && ferr == nil, "at most one of them ends the move")
			fin, err := mv.Status(ctx, st.ID)
			require.NoError(t, err)
			ov, overridden := e.table().Overrides[tenant]
			switch fin.State {
			case migrate.CacheDone:
				require.Equal(t, dst, ov, "a finished move routes the tenant to the target")
			case migrate.CacheRolledBack:
				require.False(t, overridden, "a rolled back move routes the tenant by its bucket: %q", ov)
			default:
				t.Fatalf("the move ended %s", fin.State)
			}
		})
	}
}

// stopAfter is a go-redis hook that, once the first call of the named migrate script has
// its reply, holds every further command of its client until released: a driver process
// stopped right after that call.
type stopAfter struct {
	script   string
	mu       sync.Mutex
	armed    bool
	reached  chan struct{}
	released chan struct{}
}

func newStopAfter(script string) *stopAfter {
	return &stopAfter{script: script, reached: make(chan struct{}), released: make(chan struct{})}
}

func (h *stopAfter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *stopAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *stopAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := strings.ToLower(cmd.Name()); n == "hello" || n == "client" || n == "auth" {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		armed := h.armed
		h.mu.Unlock()
		if armed {
			select {
			case <-h.released:
			case <-ctx.Done():
				return ctx.Err()
			}
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		if err == nil && scriptName(cmd) == h.script {
			h.mu.Lock()
			if !h.armed {
				h.armed = true
				close(h.reached)
			}
			h.mu.Unlock()
		}
		return err
	}
}

// A driver stopped right after its takeover (the reply received), whose migration another
// driver then took over and finished, is told at its next step that it was fenced: its
// Resume returns ErrFenced with the finishing driver's record, not success.
func TestDriverStoppedAfterItsTakeoverIsFencedOnceAnotherFinished(t *testing.T) {
	srv := celebritytest.Shards(t, 3)
	e := newEnvOver(t, srv[0].Client(t), map[string]migrate.ShardClient{
		"a": srv[1].Client(t), "b": srv[2].Client(t),
	}, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(13)
	src := e.openOwner(u)
	dst := other(src)
	m := newModel()
	m.seed(t, e.client(), u, 30)
	co := e.coordinator(migrate.Options{LeaseTTL: 300 * time.Millisecond})
	st, err := co.Start(ctx, migrate.Spec{Unit: u, Target: dst})
	require.NoError(t, err)

	h := newStopAfter("acquire")
	ctl := srv[0].Client(t)
	ctl.AddHook(h)
	stopped, err := migrate.New(ctl, migrate.Options{Prefix: e.prefix, Shards: e.clients, LeaseTTL: 300 * time.Millisecond})
	require.NoError(t, err)
	type result struct {
		st  migrate.Status
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := stopped.Resume(ctx, st.ID)
		done <- result{s, err}
	}()
	select {
	case <-h.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the stopped driver never took over")
	}

	// Its lease runs out (no heartbeat while stopped): another driver takes over and finishes.
	fin, err := co.Resume(ctx, st.ID)
	require.NoError(t, err)
	require.Equal(t, migrate.OwnedB, fin.State)
	close(h.released)
	z := <-done
	require.ErrorIs(t, z.err, migrate.ErrFenced)
	require.Equal(t, migrate.OwnedB, z.st.State)
	require.Equal(t, fin.Epoch, z.st.Epoch, "the record is the finishing driver's")
	require.Equal(t, dst, e.table().Owner(u))
	m.check(t, e, dst, u)
}
