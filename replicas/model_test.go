package replicas_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// TestVersionsAgainstModel runs random sequences of Sets, Deletes and delayed copy writes
// (the copy phase of a write the primary accepted earlier) and checks, after each step,
// that a reader going through the copies and a reader of the primary both see exactly what
// a model of set-if-newer with tombstones predicts (the same version with other content is
// a conflict, the same content again a no-op).
func TestVersionsAgainstModel(t *testing.T) {
	bothFleets(t, func(t *testing.T, f fleet) {
		prefix := celebritytest.NewPrefix(t)
		c := f.client(t)
		hot := newReplicator(t, c, replicas.Options{Prefix: prefix, Copies: 3, IsHot: func(string) bool { return true }})
		plain := newReplicator(t, c, replicas.Options{Prefix: prefix})
		iteration := 0
		rapid.Check(t, func(rt *rapid.T) {
			iteration++
			key := fmt.Sprintf("%sk%d", prefix, iteration)
			ctx := testkit.Ctx(t)
			type state struct {
				version   uint64
				tombstone bool
				data      string
				exists    bool
			}
			var model state
			var accepted []state
			steps := rapid.IntRange(1, 12).Draw(rt, "steps")
			for i := range steps {
				op := rapid.SampledFrom([]string{"set", "delete", "late"}).Draw(rt, "op")
				v := rapid.Uint64Range(1, 8).Draw(rt, "version")
				next := state{version: v, exists: true, tombstone: op == "delete"}
				if op == "set" {
					next.data = fmt.Sprintf("d%d", i)
				}
				switch op {
				case "set", "delete":
					var err error
					if op == "set" {
						err = hot.Set(ctx, key, []byte(next.data), v, time.Minute)
					} else {
						err = hot.Delete(ctx, key, v)
					}
					stale := model.exists && model.version > v
					same := model.exists && model.version == v && model.tombstone == next.tombstone && model.data == next.data
					conflict := model.exists && model.version == v && !same
					switch {
					case stale:
						require.ErrorIs(rt, err, replicas.ErrStaleVersion)
					case conflict:
						require.ErrorIs(rt, err, replicas.ErrConflict)
					default:
						require.NoError(rt, err)
						if !same {
							model = next
							accepted = append(accepted, next)
						}
					}
				case "late":
					if len(accepted) == 0 {
						continue
					}
					old := rapid.SampledFrom(accepted).Draw(rt, "old")
					require.NoError(rt, hot.WriteCopiesOnly(ctx, key, []byte(old.data), old.version, old.tombstone))
				}
				for _, r := range []*replicas.Replicator{hot, plain} {
					it, err := r.Get(ctx, key)
					if !model.exists || model.tombstone {
						require.True(rt, errors.Is(err, replicas.ErrNotFound), "want not found, got %v %v", it, err)
						continue
					}
					require.NoError(rt, err)
					require.Equal(rt, replicas.Item{Value: []byte(model.data), Version: model.version}, it)
				}
			}
		})
	})
}
