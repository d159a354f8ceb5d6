package migrate_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

func TestChangeLogTrimmedPastPositionRestartsFromSnapshot(t *testing.T) {
	// A tiny log cap: the source trims entries the target has not applied yet.
	e := newEnv(t, routing.ShardOptions{LogMaxLen: 20})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(0)
	e.openOwner(u)
	cl := e.client()
	m := newModel()
	m.seed(t, cl, u, 200)
	burst := false
	co := e.coordinator(migrate.Options{BatchSize: 50, OnState: func(s migrate.Status) {
		if s.State == migrate.Copying && s.Cursor == "rec:0" && !burst {
			burst = true
			m.seed(t, cl, u, 600) // rewrites seed-0..599: 600 log entries, most trimmed
		}
	}})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "b"})
	require.NoError(t, err)
	require.True(t, burst)
	require.Equal(t, 2, st.Snapshots, "the copy restarted from a fresh snapshot")
	require.Equal(t, int64(1), co.Stats().SnapshotRestarts)
	m.check(t, e, "b", u)
}

func TestMoveBackAndForthUnderLoad(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(5)
	e.openOwner(u)
	cl := e.client()
	m := newModel()
	// Three writers paced at 1 ms load every move; flat out they write about as fast as the
	// catch-up applies, and a move's catch-up runs for hundreds of rounds (four moves took
	// 3.5 to 15 s at load 16-24, past a minute at load 27).
	m.pace = time.Millisecond
	m.seed(t, cl, u, 500)
	obs := e.observe(u, "a", "b")
	stop := writeLoad(ctx, m, cl, u, 3)
	co := e.coordinator(migrate.Options{BatchSize: 100})
	from, to := "a", "b"
	for i := 0; i < 4; i++ {
		st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Source: from, Target: to})
		require.NoError(t, err, "move %d", i)
		require.Equal(t, uint64(i+2), st.FlipGen, "generations never repeat")
		require.Equal(t, routing.Ownership{Generation: st.FlipGen, State: routing.StateOpen}, e.own(to, u))
		require.Equal(t, routing.StateClosed, e.own(from, u).State)
		require.Eventually(t, func() bool { return cl.table().Generation == st.FlipGen }, 30e9, 1e6)
		from, to = to, from
	}
	require.NoError(t, stop())
	obs.finish(t)
	require.Equal(t, "a", e.table().Owner(u))
	m.check(t, e, "a", u)
	require.Equal(t, int64(4), co.Stats().Done)
	// A client holding the first table is refused everywhere.
	for _, s := range []string{"a", "b"} {
		_, err := e.shards[s].Exec(ctx, u, 1, "course", "ancient", routing.Put("k", "v"))
		require.ErrorIs(t, err, routing.ErrStaleRoute)
	}
}

func TestMigrationBetweenStandaloneAndClusterWithClusteredControl(t *testing.T) {
	cl := celebritytest.SharedCluster(t).Client(t)
	e := newEnvOver(t, cl, map[string]migrate.ShardClient{
		"a": celebritytest.Standalone(t).Client(t), "k": cl,
	}, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(2)
	require.Equal(t, "a", e.openOwner(u))
	c := e.client()
	m := newModel()
	m.seed(t, c, u, 300)
	stop := writeLoad(ctx, m, c, u, 2)
	co := e.coordinator(migrate.Options{BatchSize: 64})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "k"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.table().Generation == st.FlipGen }, 30e9, 1e6)
	st, err = co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.table().Generation == st.FlipGen }, 30e9, 1e6)
	require.NoError(t, stop())
	m.check(t, e, "a", u)
	require.Equal(t, uint64(3), st.FlipGen)
}

// Every mutating step whose reply is lost is re-checked on Resume, never assumed undone.
func TestLostReplyAtEveryStepThenResume(t *testing.T) {
	srv := celebritytest.Shards(t, 3)
	e := newEnv(t, routing.ShardOptions{})
	inj := faults.New()
	lossy := func(s *celebritytest.Server) *redis.Client {
		return s.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil); o.MaxRetries = -1 })
	}
	lc, la, lb := lossy(srv[0]), lossy(srv[1]), lossy(srv[2])
	bad, err := migrate.New(lc, migrate.Options{Prefix: e.prefix, BatchSize: 100,
		Shards: map[string]migrate.ShardClient{"a": la, "b": lb}})
	require.NoError(t, err)
	good := e.coordinator(migrate.Options{})
	// Warm the script caches so the faults match EVALSHA.
	warm := routing.BucketUnit(15)
	e.openOwner(warm)
	_, err = good.Migrate(testkit.Ctx(t), migrate.Spec{Unit: warm, Target: "a"})
	require.NoError(t, err)

	h := migrate.ScriptHashes()
	cases := []struct {
		name  string
		match faults.Match
		// recovered: the call recognises its own step after the lost reply and goes on.
		recovered bool
	}{
		{"create journal record", faults.Match{Command: "EVALSHA", Arg: h["create"]}, true},
		{"take over", faults.Match{Command: "EVALSHA", Arg: h["acquire"]}, true},
		{"step to Copying", faults.Match{Command: "EVALSHA", Arg: "snappos"}, false},
		{"claim target", faults.Match{Command: "EVALSHA", Arg: "prepare"}, false},
		{"apply batch", faults.Match{Command: "EVALSHA", Arg: h["apply"]}, false},
		{"step to ClosedA", faults.Match{Command: "EVALSHA", Arg: "closedat"}, false},
		{"close source (barrier)", faults.Match{Command: "EVALSHA", Arg: "closed", Addr: srv[1].Addr()}, false},
		{"open target", faults.Match{Command: "EVALSHA", Arg: "importing", Addr: srv[2].Addr()}, false},
		{"publish table", faults.Match{Command: "EVALSHA", Arg: "table:announce"}, false},
		{"step to OwnedB", faults.Match{Command: "EVALSHA", Arg: "flipgen"}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			u := routing.BucketUnit(uint32(i)) // buckets 0..7 on a, 8.. on b
			src := e.openOwner(u)
			dst := map[string]string{"a": "b", "b": "a"}[src]
			m := newModel()
			m.seed(t, e.client(), u, 250)
			dropped := inj.Dropped()
			inj.DropReply(tc.match, 1)
			id := "lost-" + string(rune('a'+i))
			_, err := bad.Migrate(ctx, migrate.Spec{ID: id, Unit: u, Target: dst})
			if tc.recovered {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			t.Log(err)
			require.Equal(t, dropped+1, inj.Dropped(), "the fault fired")
			// Starting again with the same ID is safe wherever the first attempt stopped.
			_, err = good.Start(ctx, migrate.Spec{ID: id, Unit: u, Target: dst})
			require.NoError(t, err)
			st, err := good.Resume(ctx, id)
			require.NoError(t, err)
			require.Equal(t, migrate.OwnedB, st.State)
			require.Equal(t, dst, e.table().Owner(u))
			m.check(t, e, dst, u)
		})
	}
}

func TestCleanupAfterGraceDeletesOnlyTheClosedCopy(t *testing.T) {
	e := newEnv(t, routing.ShardOptions{})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(11)
	e.openOwner(u)
	m := newModel()
	m.seed(t, e.client(), u, 30)
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	co := e.coordinator(migrate.Options{Grace: time.Minute, Clock: func() time.Time { return time.UnixMilli(clock.Load()) }})
	st, err := co.Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.NoError(t, err)
	_, err = co.Cleanup(ctx, st.ID)
	require.ErrorIs(t, err, migrate.ErrGraceNotElapsed)
	require.Positive(t, e.dataKeys("b", u), "the closed copy is kept during the grace period")
	clock.Add(int64(time.Minute/time.Millisecond) + 1)
	st, err = co.Cleanup(ctx, st.ID)
	require.NoError(t, err)
	require.True(t, st.Cleaned)
	require.Zero(t, e.dataKeys("b", u))
	require.Equal(t, routing.Ownership{Generation: 1, State: routing.StateClosed}, e.own("b", u), "the record stays")
	m.check(t, e, "a", u)
	_, err = co.Cleanup(ctx, st.ID)
	require.NoError(t, err, "idempotent")
}

func TestVersionFloorTravelsWithTheUnit(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	e := newEnv(t, routing.ShardOptions{TombstoneRetention: time.Millisecond,
		Clock: func() time.Time { return time.UnixMilli(clock.Load()) }})
	ctx := testkit.Ctx(t)
	u := routing.BucketUnit(13)
	require.Equal(t, "b", e.openOwner(u))
	gen := e.table().Generation
	for i, op := range []routing.Op{routing.Put("k", "v"), routing.Delete("k")} {
		_, err := e.shards["b"].Exec(ctx, u, gen, "course", fmt.Sprintf("floor-%d", i), op)
		require.NoError(t, err)
	}
	clock.Add(10) // the tombstone (version 2) expires; the next write purges it
	_, err := e.shards["b"].Exec(ctx, u, gen, "course", "floor-2", routing.Put("other", "x"))
	require.NoError(t, err)
	require.NotContains(t, e.records("b", u), routingfmt.RecordField("course", "k"), "the tombstone was purged")

	st, err := e.coordinator(migrate.Options{}).Migrate(ctx, migrate.Spec{Unit: u, Target: "a"})
	require.NoError(t, err)
	res, err := e.shards["a"].Exec(ctx, u, st.FlipGen, "course", "floor-3", routing.Put("k", "again"))
	require.NoError(t, err)
	require.Equal(t, uint64(3), res.Version, "a record recreated on the new owner starts above every old version")
}
