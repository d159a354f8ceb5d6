package hashing

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// vector is one row of testdata/hash_vectors.json.
type vector struct {
	ID         string `json:"id"`
	Hash       string `json:"hash"` // decimal uint64: JSON numbers lose precision above 2^53
	Bucket16   uint64 `json:"bucket16"`
	Bucket1024 uint64 `json:"bucket1024"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hash_vectors.json"))
	require.NoError(t, err)
	var vs []vector
	require.NoError(t, json.Unmarshal(raw, &vs))
	require.GreaterOrEqual(t, len(vs), 10, "too few hash vectors")
	return vs
}

func TestHashVectorsAreStable(t *testing.T) {
	for _, v := range loadVectors(t) {
		want, err := strconv.ParseUint(v.Hash, 10, 64)
		require.NoError(t, err, "vector %q", v.ID)
		require.Equal(t, want, Sum64(v.ID), "hash of %q", v.ID)
		require.Equal(t, v.Bucket16, Bucket(v.ID, 16), "bucket16 of %q", v.ID)
		require.Equal(t, v.Bucket1024, Bucket(v.ID, 1024), "bucket1024 of %q", v.ID)
	}
}

func TestKnownXXHash64Values(t *testing.T) {
	// Published xxhash64 (seed 0) reference values, independent of the vectors file.
	require.Equal(t, uint64(0xef46db3751d8e999), Sum64(""))
	require.Equal(t, uint64(0x44bc2cf5ad770999), Sum64("abc"))
}
