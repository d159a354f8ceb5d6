package slot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/slot"
)

func TestHasBracesFindsEitherBrace(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", false},
		{"celebrity:escrow:", false},
		{"a{b", true},
		{"a}b", true},
		{"{}", true},
		{"\xff\xfe", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			require.Equal(t, tc.want, slot.HasBraces(tc.in))
		})
	}
}

func TestTaggedKeysShareTheTagsSlot(t *testing.T) {
	for _, tag := range []string{"pool:eu", "x", slot.TagFor(0), slot.TagFor(16383), "é:ü"} {
		base := slot.Tagged("celebrity:escrow:", tag)
		require.Equal(t, "celebrity:escrow:{"+tag+"}", base)
		require.Equal(t, tag, slot.Tag(base+":meta"))
		require.Equal(t, slot.Of(tag), slot.Of(base+":meta"))
		require.Equal(t, slot.Of(base+":free"), slot.Of(base+":log"))
	}
}

// TestTaggedAgreesWithCluster asks a real cluster where tagged keys live: CLUSTER KEYSLOT
// of every key built on one Tagged base is the tag's slot.
func TestTaggedAgreesWithCluster(t *testing.T) {
	c := celebritytest.SharedCluster(t).Client(t)
	ctx := t.Context()
	for _, tag := range []string{"pool:eu", slot.TagFor(42), "with space"} {
		base := slot.Tagged(celebritytest.NewPrefix(t), tag)
		for _, suffix := range []string{":meta", ":free", ":{other}"} {
			got, err := c.ClusterKeySlot(ctx, base+suffix).Result()
			require.NoError(t, err)
			require.Equal(t, int64(slot.Of(tag)), got, "key %q", base+suffix)
		}
	}
}
