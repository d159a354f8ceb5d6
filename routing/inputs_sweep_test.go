package routing_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

// TestShardNamesRoundTripThroughTheStore: a table naming shards with bytes that are not
// UTF-8 is refused with ErrInvalidTable naming the shard and is not stored (JSON would have
// replaced the bytes); one naming shards with NUL, ':', braces or 1 MiB loads back exactly.
// NewShard and New refuse a name no table can hold, naming the argument.
func TestShardNamesRoundTripThroughTheStore(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	ctx := testkit.Ctx(t)
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
		_, err = routing.New(c, routing.Options{Shards: map[string]routing.ShardClient{name: c}})
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
	ctx := testkit.Ctx(t)
	r, err := routing.New(c, routing.Options{Shards: map[string]routing.ShardClient{"a": c, "b": c}, Prefix: prefix(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	odd := []string{"a\x00b", "a", "a:b", "a_b", ":", "{", "}", "{x}", "x", "\ufffd", strings.Repeat("t", routing.MaxTenantLen)}
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
		{strings.Repeat("t", routing.MaxTenantLen+1), "op", "k", "tenant must be 1..256 bytes, got 257"},
		{strings.Repeat("t", 1<<20), "op", "k", "tenant must be 1..256 bytes, got 1048576"},
		{"t", "", "k", "empty operation ID"},
		{"t", "op", "", "key"},
	} {
		_, err := r.Do(ctx, tc.tenant, tc.opID, routing.Put(tc.key, "v"))
		require.ErrorIs(t, err, routing.ErrInvalid, "%.20q", tc.tenant)
		require.ErrorContains(t, err, tc.want, "%.20q", tc.tenant)
		require.Less(t, len(err.Error()), 300, "the error quotes a short prefix of the input")
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
			f := routingfmt.RecordField(tenant, key)
			gt, gk, ok := routingfmt.SplitRecordField(f)
			require.True(t, ok, "tenant %.20q key %.20q", tenant, key)
			require.Equal(t, tenant, gt)
			require.Equal(t, key, gk)
			r := routingfmt.OpRecord{Fingerprint: "fp", Outcome: routingfmt.OutcomeApplied, Version: 7, Field: f}
			got, err := routingfmt.DecodeOpRecord(routingfmt.EncodeOpRecord(r))
			require.NoError(t, err)
			require.Equal(t, r, got, "tenant %.20q key %.20q", tenant, key)
		}
		rec := routing.Record{Version: 3, Value: tenant}
		got, err := routingfmt.DecodeRecord(routingfmt.EncodeRecord(rec))
		require.NoError(t, err)
		require.Equal(t, rec, got, "value %.20q", tenant)
	}
}

// TestLongTenantsAreRefusedWithAShortQuote: a tenant over routing.MaxTenantLen bytes (257
// bytes, 1 MiB) is refused everywhere it could enter a table or a unit (an override or a
// spread in a published table, a tenant or spread unit, Route), with an error wrapping
// ErrInvalid (ErrInvalidTable for a table) that names the tenant and quotes a short prefix
// of it; nothing is stored. A tenant of exactly MaxTenantLen bytes is placed and loads back.
func TestLongTenantsAreRefusedWithAShortQuote(t *testing.T) {
	c := celebritytest.Standalone(t).Client(t)
	ctx := testkit.Ctx(t)
	r, err := routing.New(c, routing.Options{Shards: map[string]routing.ShardClient{"a": c, "b": c}, Prefix: prefix(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, r.Store().Publish(ctx, routing.EvenTable(1, 16, "a", "b")))
	short := func(err error) {
		t.Helper()
		require.ErrorContains(t, err, "tenant must be 1..256 bytes")
		require.Less(t, len(err.Error()), 300, "the error quotes a short prefix of the tenant")
	}
	for _, tenant := range []string{strings.Repeat("t", routing.MaxTenantLen+1), strings.Repeat("t", 1<<20)} {
		for _, place := range []func(tb *routing.Table){
			func(tb *routing.Table) { tb.SetOverride(tenant, "b") },
			func(tb *routing.Table) { tb.SetSpread(tenant, []string{"a", "b"}) },
		} {
			tb := routing.EvenTable(2, 16, "a", "b")
			place(tb)
			err := r.Store().Publish(ctx, tb)
			require.ErrorIs(t, err, routing.ErrInvalidTable)
			short(err)
			cur, err := r.Store().Load(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(1), cur.Generation, "a refused table is not stored")
		}
		for _, u := range []routing.Unit{routing.TenantUnit(tenant), routing.SpreadUnit(tenant, 1)} {
			err := u.Validate()
			require.ErrorIs(t, err, routing.ErrInvalid)
			short(err)
		}
		_, err := r.Route(tenant, "k")
		require.ErrorIs(t, err, routing.ErrInvalid)
		short(err)
	}
	tenant := strings.Repeat("t", routing.MaxTenantLen)
	tb := routing.EvenTable(2, 16, "a", "b")
	tb.SetOverride(tenant, "b")
	require.NoError(t, r.Store().Publish(ctx, tb))
	got, err := r.Store().Load(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", got.Overrides[tenant])
}
