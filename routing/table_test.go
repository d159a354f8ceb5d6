package routing_test

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/hashing"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/routing"
)

func bucketOf(id string, n uint32) uint32 { return uint32(hashing.Bucket(id, uint64(n))) }

func TestValidateRejectsBrokenTables(t *testing.T) {
	good := func() *routing.Table {
		tb := routing.EvenTable(1, 16, "a", "b")
		tb.SetOverride("fat", "b")
		tb.SetSpread("huge", []string{"a", "b", "a"})
		return tb
	}
	require.NoError(t, good().Validate())
	cases := map[string]func(*routing.Table){
		"generation 0":         func(t *routing.Table) { t.Generation = 0 },
		"B 0":                  func(t *routing.Table) { t.Buckets = 0 },
		"B above max":          func(t *routing.Table) { t.Buckets = routing.MaxBuckets + 1 },
		"no shards":            func(t *routing.Table) { t.Shards = nil },
		"empty shard name":     func(t *routing.Table) { t.Shards = append(t.Shards, "") },
		"duplicate shard":      func(t *routing.Table) { t.Shards = append(t.Shards, "a") },
		"unowned bucket":       func(t *routing.Table) { t.Ranges[1].First++ },
		"unowned tail":         func(t *routing.Table) { t.Ranges[1].Last-- },
		"overlap":              func(t *routing.Table) { t.Ranges[0].Last++ },
		"range past B":         func(t *routing.Table) { t.Ranges[1].Last = 16 },
		"inverted range":       func(t *routing.Table) { t.Ranges[1].First, t.Ranges[1].Last = 15, 8 },
		"unknown range shard":  func(t *routing.Table) { t.Ranges[0].Shard = "z" },
		"unknown override":     func(t *routing.Table) { t.SetOverride("fat", "z") },
		"empty override":       func(t *routing.Table) { t.SetOverride("", "a") },
		"unknown spread shard": func(t *routing.Table) { t.SetSpread("huge", []string{"a", "z"}) },
		"empty spread":         func(t *routing.Table) { t.SetSpread("huge", []string{}) },
		"both":                 func(t *routing.Table) { t.SetOverride("huge", "a") },
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			tb := good()
			breakIt(tb)
			err := tb.Validate()
			require.ErrorIs(t, err, routing.ErrInvalidTable)
		})
	}
	var nilTable *routing.Table
	require.ErrorIs(t, nilTable.Validate(), routing.ErrInvalidTable)
}

func TestSetBucketRewritesRanges(t *testing.T) {
	tb := routing.EvenTable(1, 8, "a", "b")
	next := tb.Next()
	next.SetBucket(2, "b")
	require.NoError(t, next.Validate())
	require.Equal(t, uint64(2), next.Generation)
	require.Equal(t, []routing.Range{{First: 0, Last: 1, Shard: "a"}, {First: 2, Last: 2, Shard: "b"},
		{First: 3, Last: 3, Shard: "a"}, {First: 4, Last: 7, Shard: "b"}}, next.Ranges)
	require.Equal(t, "a", tb.BucketOwner(2), "Next copies; the original is unchanged")
	next.SetBucket(2, "a")
	require.Equal(t, tb.Ranges, next.Ranges)
}

type hashVector struct {
	ID         string `json:"id"`
	Hash       string `json:"hash"`
	Bucket16   uint32 `json:"bucket16"`
	Bucket1024 uint32 `json:"bucket1024"`
}

func loadVectors(t *testing.T) []hashVector {
	t.Helper()
	b, err := os.ReadFile("../testdata/hash_vectors.json")
	require.NoError(t, err)
	var vs []hashVector
	require.NoError(t, json.Unmarshal(b, &vs))
	require.NotEmpty(t, vs)
	return vs
}

func TestHashVectorsRoute(t *testing.T) {
	vs := loadVectors(t)
	for _, buckets := range []uint32{16, 1024} {
		// B is fixed for a store's life, so each B gets its own fleet prefix.
		t.Run("B="+strconv.Itoa(int(buckets)), func(t *testing.T) {
			f := newFleet(t)
			r := f.router(t, routing.Options{}, nil)
			tb := routing.EvenTable(1, buckets, shardNames...)
			require.NoError(t, f.store(t).Publish(testkit.Ctx(t), tb))
			awaitGen(t, r, 1)
			for _, v := range vs {
				want := v.Bucket16
				if buckets == 1024 {
					want = v.Bucket1024
				}
				h, err := strconv.ParseUint(v.Hash, 10, 64)
				require.NoError(t, err)
				require.Equal(t, h, hashing.Sum64(v.ID), "hash of %q", v.ID)
				require.Equal(t, want, routing.BucketOf(v.ID, buckets), "bucket of %.20q with B=%d", v.ID, buckets)
				rt, err := r.Route(v.ID, "")
				if v.ID == "" {
					require.ErrorIs(t, err, routing.ErrInvalid, "an empty tenant is refused, not routed")
					continue
				}
				if len(v.ID) > routing.MaxTenantLen {
					require.ErrorIs(t, err, routing.ErrInvalid, "a tenant over MaxTenantLen bytes is refused, not routed")
					continue
				}
				require.NoError(t, err)
				require.Equal(t, routing.BucketUnit(want), rt.Unit, "tenant %q with B=%d", v.ID, buckets)
				require.Equal(t, tb.BucketOwner(want), rt.Shard.Name())
				require.Equal(t, uint64(1), rt.Generation)
			}
		})
	}
}
