package stripes

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// attempt is one Add call the exactly-once test makes.
type attempt struct {
	idx   int
	retry bool
}

func TestRetriesAcrossResizeCountEachEventOnce(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		// 20,000 events pass every phase and both resizes as 100,000 do (a full run).
		n := celebritytest.Rounds(100_000, 20_000)
		c := newCounter(t, rc, Options{Stripes: 4, DedupWindow: 10 * time.Minute})
		ctx := context.Background()
		rnd := rand.New(rand.NewPCG(1, 2))

		ids := make([]string, n)
		idSet := make(map[string]struct{}, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%016x", rnd.Uint64())
			idSet[ids[i]] = struct{}{}
		}
		require.Len(t, idSet, n, "the generated IDs are unique")

		var (
			times   = make([]atomic.Int64, n) // first-attempt time, Unix ns
			applied = make([]atomic.Int32, n)
			gens    = make([]atomic.Uint64, n) // generation of the first attempt
			retried atomic.Int64
			badGen  atomic.Int64
		)
		run := func(work []attempt, midway func()) {
			t.Helper()
			// Workers take batches of 100 attempts: one batch in ten goes through Add one
			// by one, the others through AddBatch.
			ch := make(chan []attempt)
			var wg sync.WaitGroup
			var batchNo atomic.Int64
			handle := func(a attempt, res Result, err error) {
				if err != nil {
					t.Errorf("event %d (retry %v): %v", a.idx, a.retry, err)
					return
				}
				if res.Applied {
					applied[a.idx].Add(1)
				}
				if !a.retry {
					gens[a.idx].Store(res.Gen)
				} else {
					retried.Add(1)
					if res.Gen != gens[a.idx].Load() {
						badGen.Add(1)
					}
				}
			}
			for range 16 {
				wg.Go(func() {
					for batch := range ch {
						adds := make([]Addition, len(batch))
						for k, a := range batch {
							ev := Event{ID: ids[a.idx]}
							if a.retry {
								ev.Time = time.Unix(0, times[a.idx].Load())
							} else {
								ev.Time = time.Now()
								times[a.idx].Store(ev.Time.UnixNano())
							}
							adds[k] = Addition{Event: ev, Delta: 1}
						}
						if batchNo.Add(1)%10 == 0 {
							for k, a := range batch {
								res, err := c.Add(ctx, adds[k].Event, 1)
								handle(a, res, err)
							}
							continue
						}
						results, errs := c.AddBatch(ctx, adds)
						for k, a := range batch {
							handle(a, results[k], errs[k])
						}
					}
				})
			}
			for k := 0; k < len(work); k += 100 {
				if midway != nil && k <= len(work)/2 && len(work)/2 < k+100 {
					midway()
				}
				ch <- work[k:min(k+100, len(work))]
			}
			close(ch)
			wg.Wait()
		}
		resize := func(to int) func() {
			return func() {
				_, err := c.Resize(ctx, to)
				require.NoError(t, err)
			}
		}
		// Retries: 10% of the events, each retried once, some in the phase of their first
		// attempt, some after one or two resizes.
		retryOf := func(from, to int) []attempt {
			var out []attempt
			for i := from; i < to; i++ {
				if i%10 == 3 {
					out = append(out, attempt{idx: i, retry: true})
				}
			}
			return out
		}
		third := n / 3
		phase := func(from, to int) []attempt {
			out := make([]attempt, 0, to-from)
			for i := from; i < to; i++ {
				out = append(out, attempt{idx: i})
			}
			return out
		}
		shuffle := func(a []attempt) []attempt {
			rnd.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
			return a
		}
		// A retry is never sent before its first attempt has returned, as in real life.
		// Phase A: the first third; the resize to 8 stripes happens while it runs. Then
		// the retries of its first half.
		run(phase(0, third), resize(8))
		run(retryOf(0, third/2), nil)
		// Phase B: the second third mixed with the rest of A's retries; then half of B's.
		run(shuffle(append(phase(third, 2*third), retryOf(third/2, third)...)), nil)
		run(retryOf(third, third+third/2), nil)
		// Phase C: the last third while resizing to 16, mixed with the rest of B's retries
		// (after the second resize); then C's retries.
		run(shuffle(append(phase(2*third, n), retryOf(third+third/2, 2*third)...)), resize(16))
		run(retryOf(2*third, n), nil)

		require.Equal(t, int64(n/10), retried.Load(), "10% of the events were retried")
		require.Zero(t, badGen.Load(), "every retry landed in its first attempt's generation")
		for i := range applied {
			require.Equal(t, int32(1), applied[i].Load(), "event %d %s applied once", i, ids[i])
		}
		require.Equal(t, int64(len(idSet)), mustSum(t, c), "the sum is the number of unique IDs")

		l, err := c.loadLayout(ctx)
		require.NoError(t, err)
		require.Len(t, l.doc.Gens, 3)
		require.Equal(t, []int{4, 8, 16}, []int{l.doc.Gens[0].Stripes, l.doc.Gens[1].Stripes, l.doc.Gens[2].Stripes})
		var stored int64
		for g := uint64(1); g <= 3; g++ {
			for _, v := range stripeValues(t, c, g) {
				stored += v
			}
		}
		require.Equal(t, int64(n), stored, "the stripes of all generations hold every event once")
		st := c.Stats()
		require.Equal(t, uint64(n), st.Applied)
		require.Equal(t, uint64(n/10), st.Duplicates)
	})
}
