package routing_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/routing"
)

// TestShardNamesRoundTripThroughTheStore: a table naming shards with bytes that are not
// UTF-8 is refused with ErrInvalidTable naming the shard and is not stored (JSON would have
// replaced the bytes); one naming shards with NUL, ':', braces or 1 MiB loads back exactly.
// NewShard and New refuse a name no table can hold, naming the argument.
func TestShardNamesRoundTripThroughTheStore(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	ctx := ctxT(t)
	for i, name := range []string{"\xff\xfe", "a\x00b", "a:b", "{", "}", "{tag}", strings.Repeat("s", 1<<20)} {
		st, err := routing.NewStore(c, routing.StoreOptions{Prefix: prefix(t) + strings.Repeat("x", i)})
		require.NoError(t, err)
		tb := routing.EvenTable(1, 16, name, "b")
		err = st.Publish(ctx, tb)
		if name == "\xff\xfe" {
			require.ErrorIs(t, err, routing.ErrInvalidTable, "shard %.20q", name)
			require.ErrorContains(t, err, `shard "\xff\xfe" is not valid UTF-8`)
			_, err = st.Load(ctx)
			require.ErrorIs(t, err, routing.ErrNoTable, "shard %.20q: a refused table is not stored", name)
			continue
		}
		got, err := st.Load(ctx)
		require.NoError(t, err, "shard %.20q", name)
		require.Equal(t, tb.Shards, got.Shards, "shard %.20q", name)
	}
	for _, name := range []string{"", "\xff\xfe"} {
		_, err := routing.NewShard(name, c, routing.ShardOptions{})
		require.ErrorIs(t, err, routing.ErrInvalid)
		require.ErrorContains(t, err, "shard name")
		_, err = routing.New(c, routing.Options{Shards: map[string]routing.Scripter{name: c}})
		require.ErrorIs(t, err, routing.ErrInvalid)
		require.ErrorContains(t, err, "Options.Shards: shard name")
	}
}

// TestOddTenantsKeysAndOpIDsRoundTrip: tenants, keys and op IDs that a mangling encoder would
// merge ("a:b" and "a_b", "{x}" and "x", "a\x00b" and "a") each keep their own record,
// through bucket and tenant (override) units; a bad tenant, key or op ID is refused with
// ErrInvalid naming it, and nothing is written.
func TestOddTenantsKeysAndOpIDsRoundTrip(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	ctx := ctxT(t)
	r, err := routing.New(c, routing.Options{Shards: map[string]routing.Scripter{"a": c, "b": c}, Prefix: prefix(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	odd := []string{"a\x00b", "a", "a:b", "a_b", ":", "{", "}", "{x}", "x", "\ufffd", strings.Repeat("t", 1<<20)}
	tb := routing.EvenTable(1, 16, "a", "b")
	tb.Overrides = map[string]string{"{x}": "b", "a:b": "a"} // tenant units with braces and ':'
	require.NoError(t, r.Store().Publish(ctx, tb))
	_, err = r.Await(ctx, 1)
	require.NoError(t, err)
	_, err = r.Provision(ctx)
	require.NoError(t, err)
	for i, tenant := range odd {
		for j, key := range odd {
			_, err := r.Do(ctx, tenant, key+"|"+tenant[:min(len(tenant), 9)], routing.Put(key, strings.Repeat("v", i*len(odd)+j)))
			require.NoError(t, err, "tenant %.20q key %.20q", tenant, key)
		}
	}
	for i, tenant := range odd {
		for j, key := range odd {
			rec, ok, err := r.Get(ctx, tenant, key)
			require.NoError(t, err, "tenant %.20q key %.20q", tenant, key)
			require.True(t, ok, "tenant %.20q key %.20q", tenant, key)
			require.Equal(t, strings.Repeat("v", i*len(odd)+j), rec.Value, "tenant %.20q key %.20q", tenant, key)
		}
	}
	n, err := celebritytest.AdminOf(t, c).DBSize(ctx).Result()
	require.NoError(t, err)
	for _, tc := range []struct{ tenant, opID, key, want string }{
		{"", "op", "k", "empty tenant"},
		{"\xff\xfe", "op", "k", "tenant must be valid UTF-8"},
		{"t", "", "k", "empty operation ID"},
		{"t", "op", "", "key"},
	} {
		_, err := r.Do(ctx, tc.tenant, tc.opID, routing.Put(tc.key, "v"))
		require.ErrorIs(t, err, routing.ErrInvalid, "%+v", tc)
		require.ErrorContains(t, err, tc.want, "%+v", tc)
	}
	after, err := celebritytest.AdminOf(t, c).DBSize(ctx).Result()
	require.NoError(t, err)
	require.Equal(t, n, after, "a refused call writes nothing")
}

// TestRecordFieldsAndOpRecordsRoundTrip: the public encodings give back exactly what they
// were given for tenants, keys and fields holding the separators and odd bytes.
func TestRecordFieldsAndOpRecordsRoundTrip(t *testing.T) {
	odd := []string{"\xff\xfe", "a\x00b", "a", "a:b", ":", "1:", "12:x", "{x}", strings.Repeat("t", 1<<20)}
	for _, tenant := range odd {
		for _, key := range append(odd, "") {
			f := routing.RecordField(tenant, key)
			gt, gk, ok := routing.SplitRecordField(f)
			require.True(t, ok, "tenant %.20q key %.20q", tenant, key)
			require.Equal(t, tenant, gt)
			require.Equal(t, key, gk)
			r := routing.OpRecord{Fingerprint: "fp", Outcome: routing.OutcomeApplied, Version: 7, Field: f}
			got, err := routing.DecodeOpRecord(routing.EncodeOpRecord(r))
			require.NoError(t, err)
			require.Equal(t, r, got, "tenant %.20q key %.20q", tenant, key)
		}
		rec := routing.Record{Version: 3, Value: tenant}
		got, err := routing.DecodeRecord(routing.EncodeRecord(rec))
		require.NoError(t, err)
		require.Equal(t, rec, got, "value %.20q", tenant)
	}
}
