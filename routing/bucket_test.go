package routing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/routing"
)

// TestBucketOfFollowsTheHashVectors pins BucketOf to the shared vectors the Router is
// checked against, so a tool that finds a tenant's bucket agrees with every Router.
func TestBucketOfFollowsTheHashVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		require.Equal(t, v.Bucket16, routing.BucketOf(v.ID, 16), "tenant %q, B=16", v.ID)
		require.Equal(t, v.Bucket1024, routing.BucketOf(v.ID, 1024), "tenant %q, B=1024", v.ID)
	}
}
