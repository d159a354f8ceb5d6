package fleet

import (
	"sort"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/celebrity-go/celebrity/hotkeys"
)

// The slow lane (Options.SlowReportEvery): lukewarm keys, read by each instance under
// ReportMinRate but possibly at PromoteRate in the fleet's sum, reported by each instance
// once every SlowReportEvery intervals with their average rate, and summed by the leader over
// that many intervals.
const (
	// slowCapacity is the slow lane detector's keys per sub-window.
	slowCapacity = 256
	// slowTop is how many times ReportTop keys an instance takes from the last interval's
	// reads into its slow lane each interval.
	slowTop = 4
	// slowShare is the share of ReportTop an instance reports in the slow lane (at least one
	// key): a lukewarm key that matters in the fleet's sum is among each instance's heaviest,
	// and every pair is one more call inside Redis on the summary's node.
	slowShare = 4
	// slowMinReads is the least number of reads since its previous slow report for which an
	// instance reports a lukewarm key: a key read once is noise, not a trend.
	slowMinReads = 2
	// slowField starts a slow-lane field in a summary hash ("k:" starts a regular one).
	slowField = "s:"
)

// Observe records one Redis-level read of key for the reports.
func (l *Loop) Observe(key string) {
	l.det.Observe(key)
	if l.o.ReportInterval > 0 && l.fleet.isHot(key) {
		l.fleet.countHot(key, l.o.Clock().UnixNano()/int64(l.o.ReportInterval))
	}
	if l.slow != nil {
		l.slow.Observe(key)
	}
}

// slowLane is the slow lane's part of the regular report of interval slot: it adds the last
// interval's reads of the keys the regular lane leaves out (top is the regular lane's
// reading; a key at or above ReportMinRate there or over the last interval, or sent early
// in the interval, is the regular lane's) to this instance's running sums, and on this
// instance's turn returns the key/rate pairs to report (the heaviest ReportTop/slowShare
// keys read at least slowMinReads times, with their average rate over the intervals summed)
// and starts the sums again.
func (l *Loop) slowLane(top []hotkeys.KeyLoad, slot int64) []any {
	if l.slow == nil {
		return nil
	}
	l.countSlow(top)
	every := int64(l.o.SlowReportEvery)
	if (slot+int64(xxhash.Sum64String(l.o.InstanceID+"/slow")%uint64(every)))%every != 0 {
		return nil
	}
	return l.slowPairs()
}

// countSlow adds the last interval's reads of the lukewarm keys (under ReportMinRate, not in
// the regular lane's top and not sent in this interval) to the slow lane's counts.
func (l *Loop) countSlow(top []hotkeys.KeyLoad) {
	f := &l.fleet
	warm := make(map[string]bool, len(top))
	for _, k := range top {
		if k.Rate > 0 && k.Rate >= l.o.ReportMinRate {
			warm[k.Key] = true
		}
	}
	last, err := l.slow.Top(min(slowTop*l.o.ReportTop, slowCapacity))
	if err != nil {
		return
	}
	if f.slowReads == nil {
		f.slowReads = map[string]float64{}
	}
	for _, k := range last {
		// The reads counted, not Rate × the interval: the rate divides by the history the
		// detector covers, less than the interval (a tenth of it while the detector is young),
		// and would overstate the reads.
		if k.Rate > 0 && k.Rate < l.o.ReportMinRate && !warm[k.Key] && !f.sent[k.Key] {
			f.slowReads[k.Key] += k.Count
		}
	}
	f.slowN++
}

// slowPairs returns the key/rate pairs of a slow report, the heaviest ReportTop/slowShare
// keys read at least slowMinReads times, at their average rates over the intervals counted,
// and starts the next count.
func (l *Loop) slowPairs() []any {
	f := &l.fleet
	keys := make([]string, 0, len(f.slowReads))
	for k, n := range f.slowReads {
		if n >= slowMinReads {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return f.slowReads[keys[i]] > f.slowReads[keys[j]] })
	secs := l.o.ReportInterval.Seconds()
	var pairs []any
	for _, k := range keys[:min(len(keys), max(1, l.o.ReportTop/slowShare))] {
		pairs = append(pairs, k, fmtRate(f.slowReads[k]/(float64(f.slowN)*secs)))
	}
	f.slowReads, f.slowN = map[string]float64{}, 0
	return pairs
}

// summaryIntervals is how many intervals a summary hash lives: 3, or the slow lane's window
// and two more, so that a new leader reads back the slow reports it needs.
func (o Options) summaryIntervals() int64 { return max(3, int64(o.SlowReportEvery)+2) }

// ParseSummary adds one summary hash's regular rates to rates, its sampled ones (K times an
// instance's rate, reported on its turn) to sampled and its slow-lane rates to slow, and
// returns the instances its reports stand for (the field "n", see report.lua).
func ParseSummary(h map[string]string, rates, sampled, slow map[string]float64) (instances int64) {
	for field, v := range h {
		r, _ := strconv.ParseFloat(v, 64)
		if k, ok := strings.CutPrefix(field, "k:"); ok {
			rates[k] += r
		} else if k, ok := strings.CutPrefix(field, "t:"); ok {
			sampled[k] += r
		} else if k, ok := strings.CutPrefix(field, slowField); ok {
			slow[k] += r
		} else if field == "n" {
			instances += int64(r)
		}
	}
	return instances
}

// slowWindow returns the slow-lane rates of the intervals slot-SlowReportEvery+1..slot: the
// earlier ones as the leader holds them, with cur, the interval slot's own sums.
func (f *fleet) slowWindow(slot int64, every int, cur map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(cur))
	for k, r := range cur {
		out[k] += r
	}
	for s, m := range f.slowRing {
		if s > slot-int64(every) && s < slot {
			for k, r := range m {
				out[k] += r
			}
		}
	}
	return out
}

// keepSlow records the slow-lane sums of interval slot, fully evaluated, and forgets those
// no later evaluation needs.
func (f *fleet) keepSlow(slot int64, every int, sums map[string]float64) {
	if f.slowRing == nil {
		f.slowRing = map[int64]map[string]float64{}
	}
	f.slowRing[slot] = sums
	for s := range f.slowRing {
		if s <= slot-int64(every) {
			delete(f.slowRing, s)
		}
	}
}

// missingSlow returns the intervals before slot, within the slow lane's window, whose sums
// the leader does not hold (it just took over, or skipped an interval).
func (f *fleet) missingSlow(slot int64, every int) []int64 {
	var out []int64
	for s := slot - int64(every) + 1; s < slot; s++ {
		if _, ok := f.slowRing[s]; !ok {
			out = append(out, s)
		}
	}
	return out
}
