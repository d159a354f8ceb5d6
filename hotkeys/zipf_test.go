package hotkeys_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// zipf draws ranks 0..n-1 with P(r) ∝ (r+1)^-s in O(1) through Vose's alias method, for any
// s > 0 (math/rand's Zipf needs s > 1, and the 0.99 case matters most: it has the
// heaviest tail).
type zipf struct {
	n     uint64
	prob  []uint32 // accept rank i when the high 32 bits are below prob[i]
	alias []uint32
	s     float64
	sum   float64 // normalisation constant
}

// share returns the probability of rank i.
func (z *zipf) share(i int) float64 { return math.Pow(float64(i+1), -z.s) / z.sum }

func newZipf(n int, s float64) *zipf {
	w := make([]float64, n)
	sum := 0.0
	for i := range w {
		w[i] = math.Pow(float64(i+1), -s)
		sum += w[i]
	}
	z := &zipf{n: uint64(n), prob: make([]uint32, n), alias: make([]uint32, n), s: s, sum: sum}
	var small, large []uint32
	for i := range w {
		w[i] *= float64(n) / sum // mean 1
		if w[i] < 1 {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		l, g := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		z.prob[l] = uint32(math.Min(w[l]*(1<<32), math.MaxUint32))
		z.alias[l] = g
		w[g] -= 1 - w[l]
		if w[g] < 1 {
			large = large[:len(large)-1]
			small = append(small, g)
		}
	}
	for _, i := range append(small, large...) { // leftovers are 1 up to rounding
		z.prob[i], z.alias[i] = math.MaxUint32, i
	}
	return z
}

// next maps one uniform 64-bit value to a rank: the low half picks a column, the high half
// chooses between the column and its alias.
func (z *zipf) next(r uint64) int {
	i := (uint64(uint32(r)) * z.n) >> 32
	if uint32(r>>32) < z.prob[i] {
		return int(i)
	}
	return int(z.alias[i])
}

// TestZipfRecallAndSharesWithSampling is the accuracy contract: over 1,000,000 keys with
// Zipf exponents 0.99, 1.2 and 2.0, sampling one request in 16, the detector's top 10 holds
// the true top 10 (recall >= 0.95) and its shares are within 10% relative of the true ones
// for every key above 1% share.
func TestZipfRecallAndSharesWithSampling(t *testing.T) {
	t.Parallel()
	const (
		keys   = 1_000_000
		window = time.Minute
	)
	names := make([]string, keys)
	for i := range names {
		names[i] = "item:" + strconv.Itoa(i)
	}
	// Stream lengths put the 10th/11th rank boundary and the 1%-share estimates about 2.7
	// standard deviations of sampling noise inside the bounds: α=0.99 has the flattest head
	// (ranks 10 and 11 differ by 10%) and needs the longest stream.
	for _, tc := range []struct {
		alpha  float64
		events int
	}{{0.99, 4_000_000}, {1.2, 1_500_000}, {2.0, 1_500_000}} {
		alpha, events := tc.alpha, tc.events
		t.Run("alpha="+strconv.FormatFloat(alpha, 'f', -1, 64), func(t *testing.T) {
			t.Parallel()
			z := newZipf(keys, alpha)
			clk := testkit.NewClock(clockStart)
			sampler := rand.New(rand.NewPCG(7, math.Float64bits(alpha)))
			d, err := hotkeys.New(hotkeys.Options{
				SampleRate:   1.0 / 16,
				Window:       window,
				EvalInterval: -1,
				Clock:        clk.Now,
				Rand:         sampler.Uint64, // only this goroutine observes
			})
			require.NoError(t, err)
			defer d.Close()

			stream := rand.New(rand.NewPCG(11, math.Float64bits(alpha)))
			chunk := events / 100
			for i := range events {
				d.Observe(names[z.next(stream.Uint64())])
				if i%chunk == chunk-1 {
					// Spread the stream over 80% of the window so every sub-window holds
					// part of it and Top merges them.
					clk.Advance(window * 8 / 10 / 100)
				}
			}

			// Rank r is the r-th most popular key of the distribution.
			trueTop := map[string]bool{}
			for _, name := range names[:10] {
				trueTop[name] = true
			}

			top, err := d.Top(10)
			require.NoError(t, err)
			found := 0
			for _, l := range top {
				if trueTop[l.Key] {
					found++
				}
			}
			recall := float64(found) / 10
			t.Logf("alpha=%v: recall of the true top 10 = %.2f (sampled %d of %d)", alpha, recall, d.Stats().Sampled, events)
			require.GreaterOrEqual(t, recall, 0.95)

			est, err := d.Top(64)
			require.NoError(t, err)
			byKey := map[string]hotkeys.KeyLoad{}
			for _, l := range est {
				byKey[l.Key] = l
			}
			worst, checked := 0.0, 0
			for i := range names {
				trueShare := z.share(i)
				if trueShare <= 0.01 {
					break
				}
				l, ok := byKey[names[i]]
				require.True(t, ok, "key %s (share %.4f) is reported", names[i], trueShare)
				rel := math.Abs(l.Share-trueShare) / trueShare
				worst = max(worst, rel)
				checked++
				require.LessOrEqual(t, rel, 0.10, "share of %s: estimated %.5f, true %.5f", names[i], l.Share, trueShare)
			}
			require.Positive(t, checked)
			t.Logf("alpha=%v: %d keys above 1%% share, worst relative share error %.4f", alpha, checked, worst)
		})
	}
}
