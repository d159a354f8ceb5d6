package testkit

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
)

// ZipfKeys returns n keys drawn from a Zipf distribution (s=1.01) over distinct keys
// (prefix + "key:" + a number below distinct), the same keys on every call.
func ZipfKeys(prefix string, n, distinct int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.01, 1, uint64(distinct-1))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint(prefix, "key:", z.Uint64())
	}
	return keys
}

// BenchParallel calls get on keys in parallel, b.N times in all; the length of keys must be
// a power of two. Besides the wall time per call it reports the process's CPU time per call
// (cpu-ns/op, summed over the cores): on a machine shared with other processes, a core taken
// away lengthens the wall time of a parallel run but not the CPU time its calls cost, while
// cache lines bouncing between cores lengthen both. A get that returns false stops the
// benchmark with a panic: a miss in a hit benchmark measures something else.
func BenchParallel(b *testing.B, keys []string, get func(string) bool) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU(b)
	b.RunParallel(func(shared *testing.PB) {
		// Each goroutine counts its iterations in a copy of its PB on its own stack: the PB
		// itself is a small heap object, written by every Next, that can share a cache line
		// with the other goroutines' PBs, which would make every iteration pay for a line
		// bouncing between cores whatever the cache measured.
		pb := *shared
		i := rand.IntN(len(keys))
		for pb.Next() {
			if !get(keys[i&(len(keys)-1)]) {
				panic("miss")
			}
			i++
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the CPU time the process has used, user and system, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
