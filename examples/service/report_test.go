package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/celebrity-go/celebrity"
)

type row struct {
	target, figure string
	met            bool
}

type results struct {
	rows  []row
	notes []string
}

func (r *results) add(target string, met bool, format string, a ...any) {
	r.rows = append(r.rows, row{target: target, figure: fmt.Sprintf(format, a...), met: met})
}

func (g *gameday) measure(tr *traffic, smp *sampler, pl plan, start, onset, fadeAt, end, skewFrom, skewTo time.Time) *results {
	res := &results{}
	key := postKey(tr.celebrity)
	g.mu.Lock()
	procs := append([]*proc(nil), g.procs...)
	g.mu.Unlock()
	atOnset := procs[:pl.processes] // the processes that saw the onset

	// Promotion and striping on every process that saw the onset.
	var worstP, worstS time.Duration
	promoted, striped := 0, 0
	tr.rec.mu.Lock()
	stripedAt := map[string]time.Time{}
	for k, v := range tr.rec.stripedAt {
		stripedAt[k] = v
	}
	tr.rec.mu.Unlock()
	for _, p := range atOnset {
		for _, e := range p.hotEvents(key) {
			if e.Kind == "promoted" {
				promoted++
				worstP = max(worstP, e.At.Sub(onset))
				break
			}
		}
		if at, ok := stripedAt[p.name]; ok {
			striped++
			worstS = max(worstS, at.Sub(onset))
		}
	}
	n := len(atOnset)
	res.add(tPromoted, promoted == n && worstP <= 2*time.Second, "%d of %d processes promoted it, the last %s after onset; the fleet reported %.1f Redis-level reads/s of it 8s after onset (HTTP reads: %.0f/s; PromoteRate %.0f)",
		promoted, n, dur(worstP, promoted), g.celebRate, pl.celebReads, celebrity.DefaultPromoteRate)
	res.add(tStriped, striped == n && worstS <= 2*time.Second, "%d of %d processes wrote it in a stripe other than 0, the last %s after onset", striped, n, dur(worstS, striped))

	// Skew over the fault-free window onset+5s..onset+8s.
	reads, writes := smp.delta(skewFrom, skewTo)
	rs, ws := skew(reads), skew(writes)
	res.add(tReadSkew, rs > 0 && rs <= 1.2, "%.2f from 5s to 8s after onset (reads per master: %s)", rs, perNode(reads))
	res.add(tWriteSkew, ws > 0 && ws <= 1.2, "%.2f from 5s to 8s after onset (writes per master: %s)", ws, perNode(writes))

	// Demotion and flaps, on every process alive at the end that promoted it.
	demoted, wanted, flaps := 0, 0, 0
	var worstD time.Duration
	for _, p := range procs {
		ev := p.hotEvents(key)
		proms := 0
		for _, e := range ev {
			switch {
			case e.Kind == "promoted":
				proms++
			case e.Kind == "demoted" && e.At.Before(fadeAt):
				flaps++
			}
		}
		flaps += max(0, proms-1)
		if !p.alive() || proms == 0 {
			continue
		}
		wanted++
		if last := ev[len(ev)-1]; last.Kind == "demoted" && !last.At.Before(fadeAt) {
			demoted++
			worstD = max(worstD, last.At.Sub(fadeAt))
		}
	}
	res.add(tDemoted, wanted > 0 && demoted == wanted, "%d of %d live processes that promoted it demoted it, the last %s after it faded", demoted, wanted, dur(worstD, demoted))
	res.add(tFlaps, flaps == 0, "%d (a promotion after the first, or a demotion before the fade, on any process)", flaps)

	res.views(g, tr)
	bound := celebrity.DefaultFresh + celebrity.DefaultStale
	stale, worst := tr.rec.staleReads(bound)
	tr.rec.mu.Lock()
	nReads, nPuts := len(tr.rec.reads), 0
	for _, p := range tr.rec.puts {
		nPuts += len(p)
	}
	tr.rec.mu.Unlock()
	res.add(tStale, stale == 0, "%d of %d reads past the bound (%s) after one of %d acknowledged PUTs; the oldest version seen %s after a newer PUT returned",
		stale, nReads, bound, nPuts, worst.Round(time.Millisecond))

	res.payments(tr)
	res.deadlines(tr)
	res.slowInServices(tr, procs)

	var loop uint64
	unread := 0
	for _, p := range procs {
		p.mu.Lock()
		loop += p.loop
		if !p.scraped {
			unread++
		}
		p.mu.Unlock()
	}
	ar, aw := smp.delta(start, end)
	var all uint64
	for _, v := range ar {
		all += v
	}
	for _, v := range aw {
		all += v
	}
	share := 100 * float64(loop) / float64(max(all, 1))
	res.add(tLoop, all > 0 && unread == 0 && share <= 1, "%.2f%% (%d of %d data commands on the masters; %d processes whose loop count could not be read)",
		share, loop, all, unread)
	return res
}

// views compares every post's count in Redis with the views the users sent and saw
// acknowledged: nothing acknowledged may be missing, nothing counted twice.
func (res *results) views(g *gameday, tr *traffic) {
	tr.rec.mu.Lock()
	acked, sent := map[string]int64{}, map[string]int64{}
	for _, v := range tr.rec.views {
		sent[v.post]++
		if v.acked {
			acked[v.post]++
		}
	}
	tr.rec.mu.Unlock()
	fam, err := newViews(g.cluster.Client(g.t))
	if err != nil {
		g.t.Fatal(err)
	}
	defer fam.Close()
	var lost, doubled, ambiguous, totalAcked, failed int64
	for post, s := range sent {
		ctx, cancel := context.WithTimeout(g.t.Context(), 5*time.Second)
		sum, err := fam.Sum(ctx, postKey(post))
		cancel()
		if err != nil {
			failed++
			continue
		}
		lost += max(0, acked[post]-sum)
		doubled += max(0, sum-s)
		if sum < acked[post] || sum > s {
			res.notes = append(res.notes, fmt.Sprintf("views of post %s: %d acknowledged, %d sent, %d counted", post, acked[post], s, sum))
		}
		ambiguous += s - acked[post]
		totalAcked += acked[post]
	}
	res.add(tViews, lost == 0 && doubled == 0 && failed == 0,
		"%d acknowledged views over %d posts: %d lost, %d counted twice; %d views never acknowledged after 6 attempts (counted or not); %d sums unreadable",
		totalAcked, len(sent), lost, doubled, ambiguous, failed)
}

func (res *results) payments(tr *traffic) {
	tr.rec.mu.Lock()
	defer tr.rec.mu.Unlock()
	var under, denied int
	var admitted []int64
	for _, p := range tr.rec.pays {
		if p.under50 {
			under++
			if !p.allowed {
				denied++
			}
		}
		if p.allowed {
			admitted = append(admitted, p.at)
		}
	}
	res.add(tNoDenial, under > 0 && denied == 0, "%d of %d payments denied at 40%% of the limit", denied, under)
	most, when := maxAdmitted(admitted, MerchantLimit.Period, MerchantLimit.Period/10)
	res.add(tLimit, most <= int(MerchantLimit.Rate), "at most %d admitted in one period (limit %d; at %s), %d admitted in all",
		most, MerchantLimit.Rate, when.Format("15:04:05.0"), len(admitted))
}

func (res *results) deadlines(tr *traffic) {
	tr.rec.mu.Lock()
	defer tr.rec.mu.Unlock()
	var kinds []string
	late, calls := 0, 0
	for k := range tr.rec.calls {
		if k == newNameKind {
			continue
		}
		kinds = append(kinds, k)
		late += tr.rec.late[k]
		calls += tr.rec.calls[k]
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d calls, %d failed, %d late, slowest %s", k, tr.rec.calls[k], tr.rec.failed[k], tr.rec.late[k], tr.rec.slowest[k].Round(time.Millisecond)))
	}
	res.add(tClient, late == 0, "%d of %d calls late (deadline %s); %s", late, calls, Deadline, strings.Join(parts, "; "))
	k := newNameKind
	res.add(tNewName, tr.rec.calls[k] > 0 && tr.rec.late[k] == 0, "%d of %d late at the client, slowest %s",
		tr.rec.late[k], tr.rec.calls[k], tr.rec.slowest[k].Round(time.Millisecond))
	for i, l := range tr.rec.lateCalls {
		if i == 10 {
			break
		}
		res.notes = append(res.notes, fmt.Sprintf("late: %s to %s took %s, ended %s, status %d %v",
			l.kind, l.proc, l.call.Took.Round(time.Millisecond), l.end.Format("15:04:05.000"), l.call.Status, l.call.Err))
	}
}

// slowInServices checks the requests the processes themselves logged as answered past
// their deadline + 50ms (the first views of new posts apart: see tNewName).
func (res *results) slowInServices(tr *traffic, procs []*proc) {
	tr.rec.mu.Lock()
	calls := 0
	for k, n := range tr.rec.calls {
		if k != newNameKind {
			calls += n
		}
	}
	tr.rec.mu.Unlock()
	late, newLate := 0, 0
	var slowest, newSlowest time.Duration
	for _, p := range procs {
		p.mu.Lock()
		for _, s := range p.slow {
			if strings.HasPrefix(s.Path, "/posts/new-") {
				newLate++
				newSlowest = max(newSlowest, s.Took)
				continue
			}
			late++
			slowest = max(slowest, s.Took)
			res.notes = append(res.notes, fmt.Sprintf("slow in %s: %s started %s took %s", p.name, s.Path, s.Start.Format("15:04:05.000"), s.Took))
		}
		p.mu.Unlock()
	}
	res.add(tDeadline, late == 0, "%d of %d requests answered past %s (slowest of those: %s)", late, calls, Deadline+50*time.Millisecond, dur(slowest, late))
	res.notes = append(res.notes, fmt.Sprintf("first views of new posts answered past the deadline + 50ms in the service: %d (slowest %s)", newLate, dur(newSlowest, newLate)))
}

func (res *results) print(w io.Writer, pl plan, chart string) {
	form := "short (CI)"
	if pl.processes == fullPlan.processes {
		form = "full"
	}
	fmt.Fprintf(w, "\ngame day, %s form: %d processes of examples/service on a 3-master cluster with replicas, stock go-redis options, documented defaults\n", form, pl.processes)
	fmt.Fprintf(w, "traffic: Zipf reads %.0f/s over %d posts, views %.0f/s, edits %.0f/s; celebrity reads %.0f/s, views %.0f/s, edits %.0f/s; merchant at 40%% of %d/%s (150%% during the pause)\n",
		pl.zipfReads, pl.posts, pl.zipfViews, pl.zipfPuts, pl.celebReads, pl.celebViews, pl.celebPuts, MerchantLimit.Rate, MerchantLimit.Period)
	fmt.Fprintf(w, "%-62s %-8s %-5s %s\n", "target", "result", "gate", "measured")
	for _, r := range res.rows {
		verdict, gate := "NOT MET", ""
		if r.met {
			verdict = "MET"
		}
		if expectedToHold[r.target] {
			gate = "yes"
		}
		fmt.Fprintf(w, "%-62s %-8s %-5s %s\n", r.target, verdict, gate, r.figure)
	}
	for _, n := range res.notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintf(w, "chart: %s\n", chart)
}

func dur(d time.Duration, n int) string {
	if n == 0 {
		return "(none)"
	}
	return d.Round(time.Millisecond).String()
}

func perNode(m map[string]uint64) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
