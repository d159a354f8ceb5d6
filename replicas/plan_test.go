package replicas

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestJudgePlainSettlesOnlyWhatTheCommandProves: the plain lease command of a key that is
// not hot settles a fetch alone only when its reply proves the outcome (the lease is this
// token's, a live value, an absent marker); everything else goes to acquire.lua. No Redis.
func TestJudgePlainSettlesOnlyWhatTheCommandProves(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(2000) }
	down := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		raw  string
		err  error
		want []any
	}{
		{"nothing stored: the lease is taken", "", redis.Nil, []any{"won"}},
		{"this token's lease (a retry after a lost reply)", "l2,tok,0", nil, []any{"won"}},
		{"a live value", "c2,7,v,0,,hello", nil, []any{"hit", "c2,7,v,0,,hello"}},
		{"a value live until later", "c2,7,v,2001,,hello", nil, []any{"hit", "c2,7,v,2001,,hello"}},
		{"an expired value", "c2,7,v,2000,,hello", nil, nil},
		{"a tombstone", "c2,7,x,0,,", nil, nil},
		{"a corrupt record", "c2,zz", nil, nil},
		{"an absent marker", "n2,other", nil, []any{"absent"}},
		{"another holder's lease", "l2,other,0", nil, nil},
		{"this token's lease with waiters", "l2,tok,2", nil, nil},
		{"an error marker", "e2,other,boom", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := judgePlain(tc.raw, tc.err, "tok", clock)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := judgePlain("", down, "tok", clock)
	require.ErrorIs(t, err, down)
}

// TestSettleReadKnowsTheCallersOwnLease: the caller's lease command, sent again by go-redis
// after its first attempt's reply was lost, finds the marker that attempt left (with or
// without waiters counted since): the lease is the caller's own, won as if the reply had
// arrived, never "someone else's lease", which would have the caller wait for its own lease
// to run out. No Redis.
func TestSettleReadKnowsTheCallersOwnLease(t *testing.T) {
	r := &Replicator{opts: Options{Clock: func() time.Time { return time.UnixMilli(2000) }}}
	const token = "id1.5000"
	for _, tc := range []struct {
		name string
		raw  string
		err  error
		want leaseRead
	}{
		{"nothing stored: the lease is taken", "", redis.Nil, leaseRead{token: token, won: true, sure: true}},
		{"the reply was lost", "", errors.New("i/o timeout"), leaseRead{token: token}},
		{"its own marker (a retry)", "l2,id1.5000,0", nil, leaseRead{token: token, won: true, sure: true}},
		{"its own marker, renewed, with waiters", "l2,id1.9000,3", nil, leaseRead{token: token, won: true, sure: true}},
		{"another holder's lease", "l2,id2.5000,0", nil, leaseRead{token: token, sure: true}},
		{"a holder whose id starts alike", "l2,id10.5000,0", nil, leaseRead{token: token, sure: true}},
		{"an expired value", "c2,7,v,2000,,hello", nil, leaseRead{token: token, sure: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, done, pre, err := r.settleRead(tc.raw, tc.err, token)
			require.NoError(t, err)
			require.False(t, done)
			require.Equal(t, tc.want, *pre)
		})
	}
}

// TestJudgeCopiesNamesEachFailedCopy: a copy write fails by its own error, by a conflicting
// copy of the same version, or by the unsatisfied WAIT after it; every other copy counts as
// written. No Redis.
func TestJudgeCopiesNamesEachFailedCopy(t *testing.T) {
	reply := func(val any, err error) *redis.Cmd {
		c := redis.NewCmd(t.Context())
		c.SetVal(val)
		c.SetErr(err)
		return c
	}
	down := errors.New("connection refused")
	targets := []target{{index: 0, key: "c0"}, {index: ForeignIndex, key: "c1"}, {index: 2, key: "c2"}, {index: 1, key: "c3"}}
	cmds := []*redis.Cmd{reply([]any{setApplied}, nil), reply(nil, down), reply([]any{setConflict}, nil), reply([]any{copyLate}, nil)}

	failed, written := judgeCopies(targets, cmds, nil)
	require.Equal(t, 2, written)
	require.Equal(t, []CopyError{{Index: ForeignIndex, Key: "c1", Err: down}, {Index: 2, Key: "c2", Err: ErrConflict}}, failed)

	failed, written = judgeCopies(targets, cmds, ErrNotReplicated)
	require.Zero(t, written)
	require.Len(t, failed, 4)
	for i, f := range failed {
		require.Equal(t, targets[i].key, f.Key)
	}
	require.ErrorIs(t, failed[0].Err, ErrNotReplicated)
	require.ErrorIs(t, failed[1].Err, down)
	require.ErrorIs(t, failed[2].Err, ErrConflict)
	require.ErrorIs(t, failed[3].Err, ErrNotReplicated)
}

// TestRefusedFillAnswersFromWhatIsStored: a fill refused because the lease ended or a newer
// version is stored answers the callers from the stored record: a live value wins, a live
// tombstone at or above the loaded version is ErrNotFound, and otherwise a superseded fill
// goes round again (errLeaseLost) while a stale one returns the loaded value. No Redis.
func TestRefusedFillAnswersFromWhatIsStored(t *testing.T) {
	const now = 2000
	loaded := Item{Value: []byte("loaded"), Version: 5}
	value := func(v uint64, expiry int64) record {
		return record{version: v, expiry: expiry, data: "stored"}
	}
	tomb := func(v uint64, expiry int64) record {
		return record{version: v, tombstone: true, expiry: expiry}
	}
	storedItem := func(v uint64) Item { return Item{Value: []byte("stored"), Version: v} }
	for _, tc := range []struct {
		name    string
		status  string
		stored  record
		want    Item
		wantErr error
	}{
		{"superseded, nothing stored", setSuperseded, record{none: true}, loaded, errLeaseLost},
		{"stale, nothing stored", setStale, record{none: true}, loaded, nil},
		{"superseded, a live value", setSuperseded, value(6, 0), storedItem(6), nil},
		{"stale, a live value until later", setStale, value(7, now+1), storedItem(7), nil},
		{"superseded, an expired value (a ghost)", setSuperseded, value(7, now), loaded, errLeaseLost},
		{"stale, an expired value (a ghost)", setStale, value(7, now), loaded, nil},
		{"stale, a live newer tombstone", setStale, tomb(6, 0), Item{}, ErrNotFound},
		{"superseded, a live tombstone of the loaded version", setSuperseded, tomb(5, now+1), Item{}, ErrNotFound},
		{"superseded, a live older tombstone", setSuperseded, tomb(4, 0), loaded, errLeaseLost},
		{"stale, a live older tombstone", setStale, tomb(4, 0), loaded, nil},
		{"stale, an expired newer tombstone", setStale, tomb(9, now), loaded, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := refusedFill(tc.status, tc.stored, loaded, now)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
		})
	}
}
