package celebrity_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/celebritytest"
)

// TestGetReturnsASharedValueUnlessCloned modifies the map a Get returned: without
// Options.Clone the next Get returns the modified map (the documented sharing), with it the
// next Get, and a Get after a Set whose value the caller then modified, return what Redis
// holds.
func TestGetReturnsASharedValueUnlessCloned(t *testing.T) {
	for _, clone := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "cloned"}[clone], func(t *testing.T) {
			o := celebrity.Options[map[string]int]{Prefix: celebritytest.NewPrefix(t), Fresh: time.Hour,
				Loop: celebrity.LoopOptions{ReportInterval: -1}}
			if clone {
				o.Clone = maps.Clone
			}
			load := func(context.Context, string) (celebrity.Versioned[map[string]int], error) {
				return celebrity.Versioned[map[string]int]{Value: map[string]int{"likes": 1}, Version: 1}, nil
			}
			c, err := celebrity.New(celebritytest.Standalone(t).Client(t), load, o)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			v, err := c.Get(t.Context(), "post")
			require.NoError(t, err)
			v["likes"] = 99
			again, err := c.Get(t.Context(), "post")
			require.NoError(t, err)
			if !clone {
				require.Equal(t, 99, again["likes"], "Get's value is shared, as its comment says")
				return
			}
			require.Equal(t, 1, again["likes"])
			mine := map[string]int{"likes": 2}
			require.NoError(t, c.Set(t.Context(), "post", mine, 2))
			mine["likes"] = 77
			again, err = c.Get(t.Context(), "post")
			require.NoError(t, err)
			require.Equal(t, 2, again["likes"])
		})
	}
}
