package celebrity_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestRecordKeyIsWhereTheRecordIs reads, on a standalone server and on a cluster, the key
// RecordKey names after a Get stored the record, so that the operator's probe of a logical
// key reads the key the Cache wrote.
func TestRecordKeyIsWhereTheRecordIs(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		p := celebritytest.NewPrefix(t) + "cache:"
		cache, err := celebrity.New(c, func(context.Context, string) (celebrity.Versioned[[]byte], error) {
			return celebrity.Versioned[[]byte]{Value: []byte("v"), Version: 1}, nil
		}, celebrity.Options[[]byte]{Prefix: p, Loop: celebrity.LoopOptions{ReportInterval: -1}})
		require.NoError(t, err)
		defer cache.Close()
		_, err = cache.Get(t.Context(), "post:7")
		require.NoError(t, err)

		key := celebrity.RecordKey(p, "post:7")
		require.Regexp(t, `^`+p+`r:\{[^}]+\}k:post:7$`, key)
		n, err := celebritytest.AdminOf(t, c).Exists(t.Context(), key).Result()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "no record at %s", key)
		require.Equal(t, celebrity.DefaultPrefix+"r:", celebrity.RecordKey("", "x")[:len(celebrity.DefaultPrefix)+2])

		o := cache.Options()
		require.Equal(t, p, o.Prefix)
		require.Equal(t, celebrity.DefaultFresh, o.Fresh, "Options shows the defaults filled in")
		hs, err := cache.HotSet(t.Context())
		require.NoError(t, err)
		require.True(t, hs.Empty())
	})
}
