package l1cache

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
)

// sweepKeys are keys a mangling encoder would break or merge ("\xff\xfe" and "\ufffd",
// "a\x00b" and "a", "a:b" and "a_b", "{x}" and "x"); the empty key and a 1 MiB key too.
var sweepKeys = []string{"", "\xff\xfe", "\ufffd", "a\x00b", "a", "a:b", "a_b", "{", "}", "{x}", "x",
	"k 2 a id nonce", strings.Repeat("m", 1<<20)}

// TestOddKeysStayDistinctInTheCache: each key holds its own value, and invalidating one drops
// that key only.
func TestOddKeysStayDistinctInTheCache(t *testing.T) {
	src := newSource()
	c := newCache(t, src.load, Options[string]{Fresh: time.Hour})
	for i, k := range sweepKeys {
		c.Set(k, strings.Repeat("v", i))
	}
	for i, k := range sweepKeys {
		require.Equal(t, strings.Repeat("v", i), get(t, c, k), "key %.20q", k)
	}
	dropped := map[string]bool{"a:b": true, "{x}": true, "\xff\xfe": true}
	for k := range dropped {
		c.Invalidate(k)
	}
	for i, k := range sweepKeys {
		src.set(k, "new")
		want := strings.Repeat("v", i)
		if dropped[k] {
			want = "new"
		}
		require.Equal(t, want, get(t, c, k), "key %.20q", k)
	}
}

// TestOddKeysAndChannelsTravelUnchanged: on channels named with bytes that are not UTF-8, NUL,
// ':' and braces, every sweep key published by one instance reaches the other byte for byte.
// A channel over 256 bytes is refused, naming the option.
func TestOddKeysAndChannelsTravelUnchanged(t *testing.T) {
	celebritytest.Long(t)
	onBothFleets(t, func(t *testing.T, newClient clientFactory) {
		p := celebritytest.NewPrefix(t)
		for _, ch := range []string{"\xff\xfe", "a\x00b", ":", "{", "}", "{tag}"} {
			a := newInstance(t, newClient(t, nil), newSource(), p+ch, Options[string]{})
			b := newInstance(t, newClient(t, nil), newSource(), p+ch, Options[string]{})
			require.NoError(t, a.inv.Invalidate(context.Background(), sweepKeys...))
			for _, k := range sweepKeys {
				b.next(t, EventInvalidate, k)
			}
		}
		_, err := NewInvalidator(newClient(t, nil), newCache(t, newSource().load, Options[string]{}),
			InvalidatorOptions{Channel: strings.Repeat("c", 1<<20)})
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, "InvalidatorOptions.Channel must be 1..256 bytes, got 1048576")
	})
}
