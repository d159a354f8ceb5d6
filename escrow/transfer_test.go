package escrow

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// faultyClient returns a client of the same kind as c whose connections go through inj.
// maxRetries -1 turns off go-redis's retries, so a dropped reply surfaces as an error.
func faultyClient(t *testing.T, c redis.UniversalClient, inj *faults.Injector, maxRetries int) redis.UniversalClient {
	t.Helper()
	var f redis.UniversalClient
	if _, ok := c.(*redis.ClusterClient); ok {
		f = celebritytest.SharedCluster(t).Client(t, func(o *redis.ClusterOptions) {
			o.Dialer, o.MaxRetries = inj.Dialer(nil), maxRetries
			if maxRetries < 0 {
				o.MaxRedirects = -1 // the cluster client retries network errors as redirects
			}
		})
	} else {
		f = celebritytest.Standalone(t).Client(t, func(o *redis.Options) { o.Dialer, o.MaxRetries = inj.Dialer(nil), maxRetries })
	}
	preload(t, f)
	return f
}

func TestTransferMovesCapacityExactlyOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		old, err := p.Acquire(ctx, "a", "early")
		require.NoError(t, err)
		require.Equal(t, 1, old.Permit)
		require.NoError(t, p.Release(ctx, "a", "early"))

		require.NoError(t, p.Transfer(ctx, "a", "b", 3, "t1"))
		require.Equal(t, 2, freeAt(t, p, "a"))
		require.Equal(t, 8, freeAt(t, p, "b"))
		require.NoError(t, p.Transfer(ctx, "a", "b", 3, "t1"), "a repeated transfer is a no-op")
		require.Equal(t, 2, freeAt(t, p, "a"))
		require.Equal(t, 8, freeAt(t, p, "b"))
		rep := requireClean(t, p)
		require.Empty(t, rep.Pending)
		require.Equal(t, 10, rep.Free)

		// Permit 1 moved to b; its new holder's token is above its old holder's.
		for i := range 8 {
			g, err := p.Acquire(ctx, "b", fmt.Sprint("job", i))
			require.NoError(t, err)
			if g.Permit == 1 {
				require.Greater(t, g.Token, old.Token, "fencing tokens of a permit must rise across owners")
			}
		}
		_, err = p.Acquire(ctx, "b", "job-over")
		require.ErrorIs(t, err, ErrExhausted)
		require.Equal(t, 8, requireClean(t, p).Held)
	})
}

func TestDuplicateDeliveryAddsCapacityOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		f, err := p.Freeze(ctx, "a", "b", 4, "t1")
		require.NoError(t, err)
		require.Len(t, f.Permits, 4)
		again, err := p.Freeze(ctx, "a", "b", 4, "t1")
		require.NoError(t, err)
		require.Equal(t, f, again, "a repeated freeze returns the stored record")
		require.Equal(t, 1, freeAt(t, p, "a"), "frozen permits are no longer free at a")
		for range 3 {
			require.NoError(t, p.Deliver(ctx, f))
		}
		require.Equal(t, 9, freeAt(t, p, "b"), "b must gain 4 permits once")
		require.Equal(t, uint64(1), p.Stats().Accepted)
		rep := requireClean(t, p)
		require.Len(t, rep.Pending, 1)
		require.True(t, rep.Pending[0].Accepted)
		for range 2 {
			require.NoError(t, p.Complete(ctx, "a", "t1"))
		}
		rep = requireClean(t, p)
		require.Empty(t, rep.Pending)
		require.Equal(t, 10, rep.Free)
	})
}

func TestLostAcceptReplyStillAddsOnce(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		inj := faults.New()
		retrying := newTestPool(t, faultyClient(t, c, inj, 0), PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		inj.DropReply(faults.Match{Command: "EVALSHA", Arg: acceptScript.Hash()}, 1)
		require.NoError(t, retrying.Transfer(ctx, "a", "b", 2, "t1"), "go-redis retries the accept")
		require.Equal(t, int64(1), inj.Dropped())
		require.Equal(t, 7, freeAt(t, retrying, "b"))
		require.Equal(t, 3, freeAt(t, retrying, "a"))

		// Without retries the caller sees the error; the source keeps the permits frozen.
		inj2 := faults.New()
		opts := retrying.opts
		p, err := NewPool(faultyClient(t, c, inj2, -1), opts)
		require.NoError(t, err)
		inj2.DropReply(faults.Match{Command: "EVALSHA", Arg: acceptScript.Hash()}, 1)
		require.Error(t, p.Transfer(ctx, "a", "b", 2, "t2"))
		require.Equal(t, int64(1), inj2.Dropped())
		require.Equal(t, 9, freeAt(t, p, "b"), "the accept ran once")
		require.Equal(t, 1, freeAt(t, p, "a"), "the source does not get permits back by waiting")
		rep := requireClean(t, p)
		require.Len(t, rep.Pending, 1)
		require.True(t, rep.Pending[0].Accepted)
		// Asking the target again settles it: still once.
		require.NoError(t, p.Transfer(ctx, "a", "b", 2, "t2"))
		require.Equal(t, 9, freeAt(t, p, "b"))
		rep = requireClean(t, p)
		require.Empty(t, rep.Pending)
	})
}

func TestAbortOnlyAfterRefusalAndLateAcceptFails(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		f, err := p.Freeze(ctx, "a", "b", 3, "t1")
		require.NoError(t, err)
		require.NoError(t, p.Cancel(ctx, "a", "t1"))
		require.Equal(t, 5, freeAt(t, p, "a"), "the aborted permits are back at a")
		require.ErrorIs(t, p.Deliver(ctx, f), ErrRefused, "a late delivery after the refusal must fail")
		require.Equal(t, 5, freeAt(t, p, "b"))
		require.NoError(t, p.Cancel(ctx, "a", "t1"), "cancel is idempotent")
		require.ErrorIs(t, p.Transfer(ctx, "a", "b", 3, "t1"), ErrAborted)
		require.ErrorIs(t, p.Complete(ctx, "a", "t1"), ErrAborted)
		requireClean(t, p)

		// Once the target has accepted, a cancel cannot abort: it completes instead.
		f2, err := p.Freeze(ctx, "a", "b", 2, "t2")
		require.NoError(t, err)
		require.NoError(t, p.Deliver(ctx, f2))
		require.ErrorIs(t, p.Cancel(ctx, "a", "t2"), ErrConflict)
		require.Equal(t, 3, freeAt(t, p, "a"))
		require.Equal(t, 7, freeAt(t, p, "b"))
		rep := requireClean(t, p)
		require.Empty(t, rep.Pending)
		require.ErrorIs(t, p.Cancel(ctx, "a", "nope"), ErrUnknownTransfer)
	})
}

func TestTransferBadInputChangesNothing(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := testkit.Ctx(t)
		p := newTestPool(t, c, PoolOptions{Capacity: 10, Owners: owners(10, "a", "b")})
		_, err := p.Freeze(ctx, "a", "b", 2, "used")
		require.NoError(t, err)
		before, err := p.Audit(ctx)
		require.NoError(t, err)
		cases := []struct {
			name     string
			from, to string
			k        int
			id       string
			want     error
		}{
			{"k above free", "a", "b", 4, "t", ErrInsufficient},
			{"k zero", "a", "b", 0, "t", ErrInvalid},
			{"k negative", "a", "b", -1, "t", ErrInvalid},
			{"k above capacity", "a", "b", 11, "t", ErrInvalid},
			{"unknown source", "x", "b", 1, "t", ErrUnknownOwner},
			{"unknown target", "a", "x", 1, "t", ErrUnknownOwner},
			{"empty ID", "a", "b", 1, "", ErrInvalid},
			{"to itself", "a", "a", 1, "t", ErrInvalid},
			{"ID reused with other k", "a", "b", 1, "used", ErrConflict},
		}
		for _, tc := range cases {
			_, err := p.Freeze(ctx, tc.from, tc.to, tc.k, tc.id)
			require.ErrorIs(t, err, tc.want, tc.name)
			require.ErrorIs(t, p.Transfer(ctx, tc.from, tc.to, tc.k, tc.id), tc.want, tc.name)
		}
		require.ErrorIs(t, p.Deliver(ctx, Frozen{ID: "t", From: "a", To: "b"}), ErrInvalid, "no permits")
		require.ErrorIs(t, p.Complete(ctx, "a", "nope"), ErrUnknownTransfer)
		require.ErrorIs(t, p.Complete(ctx, "x", "nope"), ErrUnknownOwner)
		// The scripts validate on their own, before any write.
		for _, args := range [][]any{{"", "b", 1, 0}, {"t", "", 1, 0}, {"t", "b", "x", 0}, {"t", "b", 1.5, 0}, {"t", "b", 0, 0}} {
			_, err := runScript(ctx, c, freezeScript, p.ledgers["a"].keys, args...)
			require.ErrorIs(t, err, ErrInvalid, "%v", args)
		}
		for _, args := range [][]any{{"t", "a", 1, 0, 0}, {"t", "a", 1, 0, 11}, {"t", "a", 1, 0, "x"}, {"t", "a", 1, 0}} {
			_, err := runScript(ctx, c, acceptScript, p.ledgers["b"].keys, args...)
			require.ErrorIs(t, err, ErrInvalid, "%v", args)
		}
		after, err := p.Audit(ctx)
		require.NoError(t, err)
		require.Equal(t, before, after, "bad input must change nothing")
	})
}

// TestCrashAfterEachTransferStepThenRecover stops a transfer after each step — by a lost
// reply without retry, or by the process going away — and lets a fresh process run Recover.
func TestCrashAfterEachTransferStepThenRecover(t *testing.T) {
	type outcome int
	const (
		completed outcome = iota
		aborted
	)
	steps := []struct {
		name string
		run  func(ctx context.Context, t *testing.T, p *Pool, inj *faults.Injector)
		want outcome
		// settled: the lost reply was the last step's, so Recover finds nothing pending.
		settled bool
	}{
		{"after freeze", func(ctx context.Context, t *testing.T, p *Pool, _ *faults.Injector) {
			_, err := p.Freeze(ctx, "a", "b", 3, "T")
			require.NoError(t, err)
		}, completed, false},
		{"freeze reply lost", func(ctx context.Context, t *testing.T, p *Pool, inj *faults.Injector) {
			inj.DropReply(faults.Match{Command: "EVALSHA", Arg: freezeScript.Hash()}, 1)
			require.Error(t, p.Transfer(ctx, "a", "b", 3, "T"))
		}, completed, false},
		{"after accept", func(ctx context.Context, t *testing.T, p *Pool, _ *faults.Injector) {
			f, err := p.Freeze(ctx, "a", "b", 3, "T")
			require.NoError(t, err)
			require.NoError(t, p.Deliver(ctx, f))
		}, completed, false},
		{"accept reply lost", func(ctx context.Context, t *testing.T, p *Pool, inj *faults.Injector) {
			inj.DropReply(faults.Match{Command: "EVALSHA", Arg: acceptScript.Hash()}, 1)
			require.Error(t, p.Transfer(ctx, "a", "b", 3, "T"))
		}, completed, false},
		{"complete reply lost", func(ctx context.Context, t *testing.T, p *Pool, inj *faults.Injector) {
			inj.DropReply(faults.Match{Command: "EVALSHA", Arg: settleScript.Hash()}, 1)
			require.Error(t, p.Transfer(ctx, "a", "b", 3, "T"))
		}, completed, true},
		{"after refusal, before abort", func(ctx context.Context, t *testing.T, p *Pool, _ *faults.Injector) {
			_, err := p.Freeze(ctx, "a", "b", 3, "T")
			require.NoError(t, err)
			accepted, err := p.refuse(ctx, "a", "b", "T")
			require.NoError(t, err)
			require.False(t, accepted)
		}, aborted, false},
		{"abort reply lost", func(ctx context.Context, t *testing.T, p *Pool, inj *faults.Injector) {
			_, err := p.Freeze(ctx, "a", "b", 3, "T")
			require.NoError(t, err)
			inj.DropReply(faults.Match{Command: "EVALSHA", Arg: settleScript.Hash()}, 1)
			require.Error(t, p.Cancel(ctx, "a", "T"))
		}, aborted, true},
		{"context cancelled before delivery", func(ctx context.Context, t *testing.T, p *Pool, _ *faults.Injector) {
			f, err := p.Freeze(ctx, "a", "b", 3, "T")
			require.NoError(t, err)
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			require.ErrorIs(t, p.Deliver(cctx, f), context.Canceled)
		}, completed, false},
	}
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				ctx := testkit.Ctx(t)
				inj := faults.New()
				opts := PoolOptions{Name: "p", Prefix: celebritytest.NewPrefix(t), Capacity: 10, Owners: owners(10, "a", "b")}
				crashing := newTestPool(t, faultyClient(t, c, inj, -1), opts)
				st.run(ctx, t, crashing, inj)
				requireClean(t, crashing)

				fresh := newTestPool(t, c, opts) // another process
				rep, err := fresh.Recover(ctx)
				require.NoError(t, err)
				require.Empty(t, rep.Pending)
				var ids []string
				if !st.settled {
					ids = []string{"T"}
				}
				if st.want == completed {
					require.Equal(t, ids, rep.Completed)
					require.Empty(t, rep.Aborted)
					require.Equal(t, 2, freeAt(t, fresh, "a"))
					require.Equal(t, 8, freeAt(t, fresh, "b"))
				} else {
					require.Equal(t, ids, rep.Aborted)
					require.Empty(t, rep.Completed)
					require.Equal(t, 5, freeAt(t, fresh, "a"))
					require.Equal(t, 5, freeAt(t, fresh, "b"))
				}
				audit := requireClean(t, fresh)
				require.Empty(t, audit.Pending)
				again, err := fresh.Recover(ctx)
				require.NoError(t, err)
				require.Empty(t, again.Completed, "a second Recover has nothing to do")
				require.Empty(t, again.Aborted)
			})
		}
	})
}
