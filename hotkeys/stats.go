package hotkeys

import "time"

// Stats is a snapshot of a Detector's counters. Counters only grow; Tracked and Hot are
// current values.
type Stats struct {
	// Sampled is the number of Observe and ObserveCost calls recorded in the sketch.
	Sampled uint64
	// Evictions counts Space-Saving replacements of the smallest entry by a new key.
	Evictions uint64
	// Rotations counts sub-window sketches recycled as the window slid.
	Rotations uint64
	// Tracked is the number of keys held in all sub-window sketches, at most
	// Capacity×Buckets.
	Tracked int64
	// ShardOverflow counts sampled events not attributed to a shard because a sub-window
	// already counted the maximum number of distinct shard names (1024).
	ShardOverflow uint64
	// Evaluations counts Evaluate calls.
	Evaluations uint64
	// HotEvents and CoolEvents count the transitions decided so far.
	HotEvents  uint64
	CoolEvents uint64
	// Hot is the number of keys hot now.
	Hot int64
}

// Stats returns the detector's counters. It takes no lock; counters are read one by one,
// so a snapshot taken under load may be off by the events of that instant.
func (d *Detector) Stats() Stats {
	var s Stats
	for _, st := range d.stripes {
		s.Sampled += st.sampled.Load()
		s.Evictions += st.evictions.Load()
		s.Rotations += st.rotations.Load()
		s.Tracked += st.tracked.Load()
		s.ShardOverflow += st.overflow.Load()
	}
	s.Evaluations = d.eval.evals.Load()
	s.HotEvents = d.eval.hotN.Load()
	s.CoolEvents = d.eval.coolN.Load()
	s.Hot = d.eval.hotNow.Load()
	return s
}

// Snapshot is one consistent reading of the detector for a metrics exporter: every figure
// in it comes from the same merge of the window.
type Snapshot struct {
	// At is the clock time of the reading.
	At time.Time
	// Covered is the span of history the window held at At.
	Covered time.Duration
	// SampleRate is the configured sampling probability.
	SampleRate float64
	// TotalRate is the estimated rate of all observed load per second.
	TotalRate float64
	// Top lists the Options.TopK heaviest keys, heaviest first.
	Top []KeyLoad
	// Hot lists the keys hot now, sorted.
	Hot []string
	// Shards is the shard view, or nil without Options.Shard.
	Shards *ShardView
	// Stats are the detector's counters.
	Stats Stats
}

// Snapshot returns the current reading of the detector.
func (d *Detector) Snapshot() Snapshot {
	v := d.collect(d.clock())
	s := Snapshot{
		At:         v.at,
		Covered:    v.covered,
		SampleRate: d.o.SampleRate,
		TotalRate:  d.rate(v, v.total),
		Hot:        d.Hot(),
		Stats:      d.Stats(),
	}
	if d.o.Shard != nil {
		sv := d.shardView(v)
		s.Shards = &sv
	}
	s.Top = d.top(v, d.o.TopK)
	return s
}
