package routing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

func TestStoredFormsRoundTrip(t *testing.T) {
	for _, r := range []routing.Record{{Version: 1, Value: ""}, {Version: 7, Value: "a:b\n{c}"}, {Version: 9, Deleted: true}} {
		got, err := routingfmt.DecodeRecord(routingfmt.EncodeRecord(r))
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	for _, bad := range []string{"", "1", "1:x:v", "0:l:v", "a:l:v", ":l:"} {
		_, err := routingfmt.DecodeRecord(bad)
		require.Error(t, err, bad)
	}
	op := routingfmt.OpRecord{Fingerprint: "ab12", Outcome: routingfmt.OutcomeMismatch, Version: 4,
		Field: routingfmt.RecordField("t:1", "k:2")}
	got, err := routingfmt.DecodeOpRecord(routingfmt.EncodeOpRecord(op))
	require.NoError(t, err)
	require.Equal(t, op, got)
	for _, bad := range []string{"", "fp:ok:1", "fp:maybe:1:f", ":ok:1:f", "fp:ok:x:f"} {
		_, err := routingfmt.DecodeOpRecord(bad)
		require.Error(t, err, bad)
	}
	for _, c := range [][2]string{{"t", "k"}, {"t:1", ":k"}, {"", ""}, {"{x}", "y"}, {"12", "3:4"}} {
		tenant, key, ok := routingfmt.SplitRecordField(routingfmt.RecordField(c[0], c[1]))
		require.True(t, ok)
		require.Equal(t, c, [2]string{tenant, key})
	}
	for _, bad := range []string{"", "x:ab", "5:ab", ":ab", "-1:a"} {
		_, _, ok := routingfmt.SplitRecordField(bad)
		require.False(t, ok, bad)
	}
}

func TestUnitTagsKeepTenantsInsideOneTag(t *testing.T) {
	k := routing.Keys{Prefix: "p"}
	require.Equal(t, "{p:b:12}", k.Tag(routing.BucketUnit(12)))
	require.Equal(t, "{p:t:a%7Db%7Bc%25}", k.Tag(routing.TenantUnit("a}b{c%")))
	require.Equal(t, "{p:s:3:acme}", k.Tag(routing.SpreadUnit("acme", 3)))
	require.Equal(t, "{celebrity:routing:b:0}:own", routingfmt.Keys(routing.Keys{}.Tag(routing.BucketUnit(0))).Own)
	require.NotEqual(t, k.Tag(routing.TenantUnit("a%7Db")), k.Tag(routing.TenantUnit("a}b")))
}

// The default prefix took the project's form "celebrity:routing:" and names the keys the
// default before v0.2.0, "celebrity:routing", named (and still names); every other prefix is
// joined with ':' as before, so no key moves on an upgrade.
func TestNoRoutingKeyMovesWithTheNewDefaultPrefix(t *testing.T) {
	for _, p := range []string{"", "celebrity:routing", "celebrity:routing:"} {
		k := routing.Keys{Prefix: p}
		require.Equal(t, "{celebrity:routing:b:7}", k.Tag(routing.BucketUnit(7)), p)
		require.Equal(t, "{celebrity:routing:t:acme}", k.Tag(routing.TenantUnit("acme")), p)
		require.Equal(t, "celebrity:routing:table", k.Table(), p)
		require.Equal(t, "{celebrity:routing:table}", k.ControlTag(), p)
		require.Equal(t, "celebrity:routing:table:announce", k.Channel(), p)
		require.Contains(t, k.LoadIndex(), "{celebrity:routing:load}", p)
		require.Equal(t, routing.ACLRule(routing.Options{}), routing.ACLRule(routing.Options{Prefix: p}), p)
	}
	require.Equal(t, "{app:b:7}", routing.Keys{Prefix: "app"}.Tag(routing.BucketUnit(7)))
	require.Equal(t, "{app::b:7}", routing.Keys{Prefix: "app:"}.Tag(routing.BucketUnit(7)), "as before v0.2.0")
	require.Equal(t, "app::table", routing.Keys{Prefix: "app:"}.Table())
}
