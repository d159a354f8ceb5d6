package hotkeys

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/celebrity-go/celebrity/internal/hashing"
)

// Detector finds the hot keys and the shard skew of the traffic it observes. Create it with
// New; the zero value is not usable. All methods are safe for concurrent use.
type Detector struct {
	o         Options
	all       bool          // SampleRate == 1: record every call
	threshold uint64        // record when Rand() < threshold
	rand      func() uint64 // nil: math/rand/v2.Uint64, called directly
	clock     func() time.Time
	origin    time.Time
	bucketDur time.Duration

	stripes    []*stripe
	stripeBits uint // stripe = hash >> (64 - stripeBits)

	eval evalState

	closeOnce sync.Once
	stop      chan struct{}
	done      chan struct{}
}

// New returns a Detector configured by o, or an error wrapping ErrInvalid that
// names the bad field. Unless o.EvalInterval is negative it starts a goroutine that calls
// Evaluate periodically; Close stops it.
func New(o Options) (*Detector, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Detector{
		o:         o,
		all:       o.SampleRate >= 1,
		threshold: math.MaxUint64,
		rand:      o.Rand,
		clock:     o.Clock,
		bucketDur: o.Window / time.Duration(o.Buckets),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if !d.all {
		d.threshold = uint64(math.Ldexp(o.SampleRate, 64)) // SampleRate < 1: below 2^64
	}
	d.origin = d.clock()
	// Stripes split the sketch so that concurrent samples rarely share a lock; each keeps
	// at least 128 keys per sub-window so the per-stripe error bound stays tight.
	n := 1
	for n < 8 && n*2*128 <= o.Capacity {
		n *= 2
	}
	d.stripeBits = uint(bits.TrailingZeros(uint(n)))
	d.stripes = make([]*stripe, n)
	for i := range d.stripes {
		d.stripes[i] = newStripe(o.Buckets, o.Capacity/n)
	}
	d.eval.hot = make(map[string]*hotState)
	if o.EvalInterval > 0 {
		go d.loop(o.EvalInterval)
	} else {
		close(d.done)
	}
	return d, nil
}

// Observe records one request for key. With probability 1-SampleRate it returns at once
// without a lock, a clock read or an allocation; otherwise it updates the sketch of the
// current sub-window under a per-stripe lock. The key string is retained while it is
// tracked (at most Capacity×Buckets keys); a key sliced from a much larger string keeps
// that string alive.
func (d *Detector) Observe(key string) {
	if d.all || d.random() < d.threshold {
		d.record(key, 1)
	}
}

// random returns the next sampling draw.
func (d *Detector) random() uint64 {
	if d.rand == nil {
		return rand.Uint64()
	}
	return d.rand()
}

// ObserveCost records one request for key that cost cost units (bytes, microseconds).
// Rates and shares are then in cost units. Mixing Observe (cost 1) and ObserveCost in one
// Detector mixes units; a zero cost records nothing.
func (d *Detector) ObserveCost(key string, cost uint64) {
	if cost != 0 && (d.all || d.random() < d.threshold) {
		d.record(key, cost)
	}
}

// record adds a sampled event to the current sub-window.
func (d *Detector) record(key string, w uint64) {
	h := hashing.Sum64(key)
	var shard string
	if d.o.Shard != nil {
		shard = d.o.Shard(key) // host code: never under our lock
	}
	e := d.epoch(d.clock())
	s := d.stripes[h>>(64-d.stripeBits)&(uint64(len(d.stripes))-1)]
	s.mu.Lock()
	s.record(e, key, h, w, shard)
	s.mu.Unlock()
}

// epoch returns the sub-window number of t; times before the origin fall in sub-window 0.
func (d *Detector) epoch(t time.Time) int64 {
	since := t.Sub(d.origin)
	if since < 0 {
		return 0
	}
	return int64(since / d.bucketDur)
}

// Close stops the background goroutine, if any, and waits for it to return. Observe and
// the read methods keep working after Close. Close is idempotent.
func (d *Detector) Close() error {
	d.closeOnce.Do(func() { close(d.stop) })
	<-d.done
	return nil
}

// loop calls Evaluate every interval until Close.
func (d *Detector) loop(interval time.Duration) {
	defer close(d.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			d.Evaluate()
		}
	}
}
