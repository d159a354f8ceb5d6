package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestDataCallsSumsDataCommandsOnly(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_get:calls=120,usec=300,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=30,usec=900,usec_per_call=30.00,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_cluster|slots:calls=5,usec=50,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=4,usec=4,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n"
	n, err := dataCalls(info)
	if err != nil {
		t.Fatal(err)
	}
	if n != 150 {
		t.Fatalf("dataCalls = %d, want 150 (get + evalsha, without info, cluster and client)", n)
	}
}

func TestSkewIsMaxOverMean(t *testing.T) {
	if got := skew([]uint64{200, 50, 50}); math.Abs(got-2) > 1e-9 {
		t.Fatalf("skew = %v, want 2", got)
	}
	if got := skew([]uint64{10, 10, 10}); got != 1 {
		t.Fatalf("skew = %v, want 1", got)
	}
	if got := skew([]uint64{0, 0, 0}); !math.IsNaN(got) {
		t.Fatalf("skew of no load = %v, want NaN", got)
	}
}

func TestPercentileOfSortedSamples(t *testing.T) {
	s := make([]int64, 100)
	for i := range s {
		s[i] = int64(i + 1)
	}
	if p := percentile(s, 0.5); p != 50 {
		t.Fatalf("p50 = %d, want 50", p)
	}
	if p := percentile(s, 0.99); p != 99 {
		t.Fatalf("p99 = %d, want 99", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Fatalf("p50 of nothing = %d, want 0", p)
	}
}

// The sampler's frequencies match 1/(k+1)^alpha normalised, for the top ranks.
func TestZipfMatchesItsDistribution(t *testing.T) {
	const n, alpha, draws = 1000, 0.99, 200_000
	z := newZipf(n, alpha)
	var h float64
	for k := range n {
		h += 1 / math.Pow(float64(k+1), alpha)
	}
	r := rand.New(rand.NewPCG(1, 2))
	counts := make([]int, n)
	for range draws {
		counts[z.sample(r)]++
	}
	for k := range 5 {
		want := draws / math.Pow(float64(k+1), alpha) / h
		if math.Abs(float64(counts[k])-want) > 5*math.Sqrt(want) {
			t.Fatalf("rank %d drawn %d times, want %.0f ± %.0f", k, counts[k], want, 5*math.Sqrt(want))
		}
	}
}
