package hotkeys_test

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// exactCounter is the reference: every call counted exactly under one mutex, in a map that
// grows with the number of distinct keys.
type exactCounter struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (c *exactCounter) Observe(key string) {
	c.mu.Lock()
	c.m[key]++
	c.mu.Unlock()
}

// benchKeys returns n keys drawn from Zipf(0.99) over 100,000 distinct keys.
func benchKeys(n int) []string {
	const distinct = 100_000
	z := newZipf(distinct, 0.99)
	names := make([]string, distinct)
	for i := range names {
		names[i] = "item:" + strconv.Itoa(i)
	}
	r := rand.New(rand.NewPCG(1, 1))
	out := make([]string, n)
	for i := range out {
		out[i] = names[z.next(r.Uint64())]
	}
	return out
}

// BenchmarkObserve measures Observe on pre-generated Zipf keys and on a single hot key, with
// every call recorded (rate=1), the default sampling (rate=1/16) and a rate so low that
// every call takes the sampled-out path, against the exact mutex+map reference, a no-op (the
// cost of the benchmark loop itself) and a bare math/rand/v2 draw (the floor of any
// per-call sampler). Run with
// -cpu 1,2 for one and two procs.
func BenchmarkObserve(b *testing.B) {
	zipfKeys := benchKeys(1 << 16)
	hot := make([]string, 1<<16)
	for i := range hot {
		hot[i] = celebrity
	}
	for _, keys := range []struct {
		name string
		keys []string
	}{{"zipf", zipfKeys}, {"onehot", hot}} {
		for _, rate := range []struct {
			name string
			v    float64
		}{{"rate=1", 1}, {"rate=1_16", 1.0 / 16}, {"sampledout", 1e-12}} {
			b.Run(keys.name+"/detector/"+rate.name, func(b *testing.B) {
				d, err := hotkeys.New(hotkeys.Options{SampleRate: rate.v, EvalInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				runParallel(b, keys.keys, d.Observe)
			})
		}
		b.Run(keys.name+"/reference-noop", func(b *testing.B) {
			runParallel(b, keys.keys, func(string) {}) // the harness alone
		})
		b.Run(keys.name+"/reference-rand", func(b *testing.B) {
			var sampled atomic.Uint64
			runParallel(b, keys.keys, func(string) { // the one random draw a sampler needs
				if rand.Uint64() < 1 {
					sampled.Add(1)
				}
			})
		})
		b.Run(keys.name+"/reference-exact-map", func(b *testing.B) {
			c := &exactCounter{m: map[string]uint64{}}
			runParallel(b, keys.keys, c.Observe)
		})
	}
}

func runParallel(b *testing.B, keys []string, observe func(string)) {
	var offset atomic.Uint64
	mask := uint64(len(keys) - 1)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := offset.Add(7919) // each goroutine walks the keys from its own place
		for pb.Next() {
			observe(keys[i&mask])
			i++
		}
	})
}

// BenchmarkTop measures a Top(10) reading of a full sketch (1024 keys × 5 sub-windows).
func BenchmarkTop(b *testing.B) {
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: -1, Clock: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	keys := benchKeys(1 << 18)
	for i, k := range keys {
		d.Observe(k)
		if i%(len(keys)/5) == 0 {
			clk.Advance(hotkeys.DefaultWindow / hotkeys.DefaultBuckets)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Top(10); err != nil {
			b.Fatal(err)
		}
	}
}
