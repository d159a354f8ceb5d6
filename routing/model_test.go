package routing_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

// modelOutcome is what the model expects of an operation.
type modelOutcome struct {
	res      routing.Result
	mismatch bool
}

// modelApply applies op to the model map the way the store must.
func modelApply(m map[string]routing.Record, op routing.Op) modelOutcome {
	cur, ok := m[op.Key]
	seen := uint64(0)
	if ok && !cur.Deleted {
		seen = cur.Version
	}
	switch {
	case op.Check && seen != op.Version:
		return modelOutcome{res: routing.Result{Version: seen}, mismatch: true}
	case op.Kind == routing.OpPut:
		m[op.Key] = routing.Record{Version: cur.Version + 1, Value: op.Value}
		return modelOutcome{res: routing.Result{Applied: true, Version: cur.Version + 1}}
	case ok && !cur.Deleted:
		m[op.Key] = routing.Record{Version: cur.Version + 1, Deleted: true}
		return modelOutcome{res: routing.Result{Applied: true, Version: cur.Version + 1}}
	}
	return modelOutcome{}
}

func TestModelStoreEqualsMapAndStaleWritesNeverLand(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, c redis.UniversalClient) {
		ctx := context.Background()
		admin := celebritytest.AdminOf(t, c) // XLEN is not in the rule
		base := prefix(t)
		iter := 0
		rapid.Check(t, func(rt *rapid.T) {
			iter++
			s := newShard(t, "a", c, base+":"+strconv.Itoa(iter), routing.ShardOptions{})
			u := routing.BucketUnit(uint32(iter))
			gen := uint64(rapid.IntRange(1, 3).Draw(rt, "gen"))
			open(t, s, u, gen)
			state := routing.StateOpen
			model := map[string]routing.Record{}
			type recorded struct {
				op  routing.Op
				out modelOutcome
			}
			ops := map[string]recorded{}
			var ids []string
			logLen := int64(0)
			keys := []string{"x", "y", "z"}
			next := 0

			genOp := func(rt *rapid.T) routing.Op {
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				check := rapid.Bool().Draw(rt, "check")
				ver := uint64(0)
				if check {
					ver = model[key].Version
					if model[key].Deleted || rapid.IntRange(0, 3).Draw(rt, "wrongVersion") == 0 {
						ver = uint64(rapid.IntRange(0, 4).Draw(rt, "version"))
					}
				}
				if rapid.IntRange(0, 2).Draw(rt, "kind") == 0 {
					return routing.Op{Kind: routing.OpDelete, Key: key, Check: check, Version: ver}
				}
				return routing.Op{Kind: routing.OpPut, Key: key, Value: rapid.StringMatching(`[a-z:]{0,6}`).Draw(rt, "value"),
					Check: check, Version: ver}
			}
			expect := func(rt *rapid.T, out modelOutcome, res routing.Result, err error, replayed bool) {
				want := out.res
				want.Replayed = replayed
				if out.mismatch {
					require.ErrorIs(rt, err, routing.ErrVersionMismatch)
				} else {
					require.NoError(rt, err)
				}
				require.Equal(rt, want, res)
			}
			// write runs a fresh operation with the generation the caller carries.
			write := func(rt *rapid.T, carried uint64) {
				op := genOp(rt)
				next++
				id := "op-" + strconv.Itoa(next)
				res, err := s.Exec(ctx, u, carried, "t", id, op)
				if carried < gen || state != routing.StateOpen {
					require.ErrorIs(rt, err, routing.ErrStaleRoute)
					return // the model does not change; the op is not recorded
				}
				out := modelApply(model, op)
				expect(rt, out, res, err, false)
				ops[id] = recorded{op: op, out: out}
				ids = append(ids, id)
				logLen++
			}
			rt.Repeat(map[string]func(*rapid.T){
				"write": func(rt *rapid.T) { write(rt, gen+uint64(rapid.IntRange(0, 1).Draw(rt, "newer"))) },
				"staleWrite": func(rt *rapid.T) {
					if gen > 1 {
						write(rt, gen-uint64(rapid.IntRange(1, int(gen-1)).Draw(rt, "older")))
					}
				},
				"retry": func(rt *rapid.T) {
					if len(ids) == 0 {
						rt.Skip("nothing to retry")
					}
					id := rapid.SampledFrom(ids).Draw(rt, "id")
					res, err := s.Exec(ctx, u, gen, "t", id, ops[id].op)
					if state != routing.StateOpen {
						require.ErrorIs(rt, err, routing.ErrStaleRoute)
						return
					}
					expect(rt, ops[id].out, res, err, true)
				},
				"reuseID": func(rt *rapid.T) {
					if len(ids) == 0 || state != routing.StateOpen {
						rt.Skip("nothing to reuse")
					}
					id := rapid.SampledFrom(ids).Draw(rt, "id")
					op := ops[id].op
					op.Value += "!"
					if op.Kind == routing.OpDelete {
						op.Kind, op.Value = routing.OpPut, "other"
					}
					_, err := s.Exec(ctx, u, gen, "t", id, op)
					require.ErrorIs(rt, err, routing.ErrConflict)
				},
				"bumpGeneration": func(rt *rapid.T) {
					from := routing.Ownership{Generation: gen, State: state}
					gen++
					_, err := s.Transition(ctx, u, from, routing.Ownership{Generation: gen, State: state})
					require.NoError(rt, err)
				},
				"closeOrReopen": func(rt *rapid.T) {
					from := routing.Ownership{Generation: gen, State: state}
					to := routing.Ownership{Generation: gen, State: routing.StateClosed}
					if state == routing.StateClosed {
						gen++
						to = routing.Ownership{Generation: gen, State: routing.StateOpen}
					}
					last, err := s.Transition(ctx, u, from, to)
					require.NoError(rt, err)
					state = to.State
					if logLen == 0 {
						require.Equal(rt, "0-0", last)
					}
				},
				"": func(rt *rapid.T) {
					k := routingfmt.Keys(s.Keys().Tag(u))
					var xlen *redis.IntCmd
					var recs *redis.MapStringStringCmd
					_, err := admin.Pipelined(ctx, func(p redis.Pipeliner) error {
						xlen = p.XLen(ctx, k.Log)
						recs = p.HGetAll(ctx, k.Records)
						return nil
					})
					require.NoError(rt, err)
					require.Equal(rt, logLen, xlen.Val(), "one change-log entry per recorded operation")
					got := map[string]routing.Record{}
					for f, v := range recs.Val() {
						tenant, key, ok := routingfmt.SplitRecordField(f)
						require.True(rt, ok)
						require.Equal(rt, "t", tenant)
						r, err := routingfmt.DecodeRecord(v)
						require.NoError(rt, err)
						got[key] = r
					}
					require.Equal(rt, model, got)
				},
				"get": func(rt *rapid.T) {
					key := rapid.SampledFrom(keys).Draw(rt, "key")
					r, ok, err := s.Get(ctx, u, gen, "t", key)
					if state != routing.StateOpen {
						require.ErrorIs(rt, err, routing.ErrStaleRoute)
						return
					}
					require.NoError(rt, err)
					want, has := model[key]
					require.Equal(rt, has, ok)
					require.Equal(rt, want, r)
				},
			})
		})
	})
}
