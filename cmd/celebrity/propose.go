package main

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/celebrity-go/celebrity/routing"
)

// proposer turns measured shard loads into proposals. It reads nothing from Redis and
// changes nothing: every proposal is a command for the operator to run.
type proposer struct {
	table     *routing.Table
	names     []string // the table's shards, sorted
	threshold float64  // --threshold
	minRate   float64  // --min-rate
	cache     bool     // --cache: route changes that re-load instead of moves
	shardArg  string   // "--shard ..." as the operator gave it, for printed commands
	ctl       string   // the control Redis flags, for printed commands
}

// hotTenant is one tenant plan proposes to change: where its share is highest, and its rate
// over every shard it is on.
type hotTenant struct {
	tenantLoad
	shard string
	total float64
	perOn map[string]float64 // shard -> the tenant's routed ops/s there
}

// propose turns every tenant whose share of a shard reaches the threshold into proposals,
// busiest first; each one's load counts on its targets (and leaves its shards) for the next.
func (p proposer) propose(loads []*shardLoad) []proposal {
	out := []proposal{}
	if len(loads) < 2 {
		return out
	}
	projected := map[string]float64{}
	hot := map[string]*hotTenant{}
	perOn := map[string]map[string]float64{}
	for _, l := range loads {
		projected[l.Name] = l.RoutedPerS
		for _, tl := range l.Tenants {
			if perOn[tl.Tenant] == nil {
				perOn[tl.Tenant] = map[string]float64{}
			}
			perOn[tl.Tenant][l.Name] += tl.RoutedPerS
			if tl.RoutedPerS < p.minRate || !(tl.Share >= p.threshold) {
				continue
			}
			if h := hot[tl.Tenant]; h == nil || tl.Share > h.Share {
				hot[tl.Tenant] = &hotTenant{tenantLoad: tl, shard: l.Name}
			}
		}
	}
	mean := meanRouted(loads)
	var order []*hotTenant
	for tenant, h := range hot {
		h.perOn = perOn[tenant]
		if _, spread := p.table.Spreads[tenant]; spread {
			for _, r := range h.perOn {
				h.total += r
			}
		} else {
			// A tenant lives on one shard; a rate elsewhere is the change log of a unit it
			// left within the window.
			h.total, h.perOn = h.RoutedPerS, map[string]float64{h.shard: h.RoutedPerS}
		}
		order = append(order, h)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].total != order[j].total {
			return order[i].total > order[j].total
		}
		return order[i].Tenant < order[j].Tenant
	})
	proposed := map[string]bool{}
	for _, h := range order {
		for _, pr := range p.proposeFor(h, mean, projected) {
			out, proposed[pr.Tenant] = append(out, pr), true
		}
	}
	return append(out, p.merges(loads, proposed, perOn, mean, projected)...)
}

// merges proposes to merge back every spread tenant with no other proposal whose whole rate
// (over every shard it is on; none measured counts as 0) fits within the target per-shard
// load: one unit holds it without reaching the threshold, so the spread only costs its
// sub-buckets. It goes to the least-loaded shard in the projection, tenants by name. A pure
// cache (--cache) gets no merge: plan has no route change for it.
func (p proposer) merges(loads []*shardLoad, proposed map[string]bool, perOn map[string]map[string]float64,
	mean float64, projected map[string]float64) []proposal {
	target := p.threshold * mean
	if p.cache || mean <= 0 {
		return nil
	}
	routed := map[string]float64{}
	for _, l := range loads {
		routed[l.Name] = l.RoutedPerS
	}
	var out []proposal
	for _, tenant := range sortedKeys(p.table.Spreads) {
		old := p.table.Spreads[tenant]
		if proposed[tenant] {
			continue
		}
		var total float64
		source := old[0]
		for _, s := range sortedCopy(old) {
			total += perOn[tenant][s]
			if perOn[tenant][s] > perOn[tenant][source] {
				source = s
			}
		}
		if total > target {
			continue
		}
		dest := p.leastLoaded(projected, perOn[tenant])[0]
		mg := proposal{Tenant: tenant, Source: source, RoutedPerS: total, MeanPerShard: mean, TargetPerShard: target,
			Action: "merge", Targets: []string{dest}, From: append([]string(nil), old...)}
		if routed[source] > 0 {
			mg.Share = perOn[tenant][source] / routed[source]
		}
		mg.Reason = fmt.Sprintf("spread over %d sub-buckets but cooled: its whole rate (%.1f/s) fits within the target per-shard load %.1f/s (%s of the mean %.1f/s), so one unit on the least-loaded shard %s holds it",
			len(old), total, target, pct(p.threshold), mean, dest)
		mg.Command = fmt.Sprintf("celebrity migrate start --merge --tenant %s --target %s %s %s", shellQuote(tenant), dest, p.shardArg, p.ctl)
		for s, r := range perOn[tenant] {
			projected[s] -= r
		}
		projected[dest] += total
		out = append(out, mg)
	}
	return out
}

// bound is the widest spread plan proposes: one sub-bucket per shard, at most
// routing.MaxSpread.
func (p proposer) bound() int { return min(len(p.names), routing.MaxSpread) }

// width is the number of sub-buckets that brings rate to target or under per sub-bucket,
// at least 2 and at most bound.
func (p proposer) width(rate, target float64) int {
	k := p.bound()
	if target > 0 {
		if w := math.Ceil(rate / target); w < float64(k) {
			k = int(w)
		}
	}
	return max(2, min(k, p.bound()))
}

// leastLoaded returns the table's shards by projected load without the tenant's own load
// (perOn), least first; ties by name.
func (p proposer) leastLoaded(projected, perOn map[string]float64) []string {
	out := append([]string(nil), p.names...)
	without := func(s string) float64 { return projected[s] - perOn[s] }
	sort.SliceStable(out, func(i, j int) bool { return without(out[i]) < without(out[j]) })
	return out
}

// proposeFor proposes what to do with one hot tenant and moves its load in the projection.
func (p proposer) proposeFor(h *hotTenant, mean float64, projected map[string]float64) []proposal {
	t := p.table
	target := p.threshold * mean
	base := proposal{Tenant: h.Tenant, Source: h.shard, Share: h.Share, RoutedPerS: h.total,
		MeanPerShard: mean, TargetPerShard: target}
	byLoad := p.leastLoaded(projected, h.perOn)
	moveTo := func(targets []string) {
		for s, r := range h.perOn {
			projected[s] -= r
		}
		for _, s := range targets {
			projected[s] += h.total / float64(len(targets))
		}
	}
	tooBig := fmt.Sprintf("it alone (%.1f/s) is more than a shard's mean load (%.1f/s), so moving it whole only moves the hot spot", h.total, mean)

	if old := t.Spreads[h.Tenant]; len(old) > 0 {
		return p.reSplit(h, base, old, byLoad, moveTo)
	}
	if h.total > mean {
		k := p.width(h.total, target)
		targets := sortedCopy(byLoad[:k])
		sp := base
		sp.Width, sp.Targets, sp.PerSub = k, targets, h.total/float64(k)
		sp.Reason = fmt.Sprintf("%s; %s", tooBig, p.widthReason(h.total, target, k))
		switch {
		case p.cache:
			sp.Action = "spread"
			sp.Command = fmt.Sprintf("celebrity routes spread %s %s --cache %s %s", shellQuote(h.Tenant), strings.Join(targets, ","), p.shardArg, p.ctl)
			moveTo(targets)
			return []proposal{sp}
		case t.Overrides[h.Tenant] != "":
			sp.Action, sp.Command = "split", p.splitCommand(h.Tenant, targets)
			moveTo(targets)
			return []proposal{sp}
		}
		// A tenant in a shared bucket is split in two steps: carved out onto the
		// least-loaded other shard, then its override split.
		carveTo := byLoad[0]
		if carveTo == h.shard {
			carveTo = byLoad[1]
		}
		cv := base
		cv.Action, cv.Targets = "carve-out", []string{carveTo}
		cv.Command = fmt.Sprintf("celebrity migrate start --carve --tenant %s --target %s %s %s", shellQuote(h.Tenant), carveTo, p.shardArg, p.ctl)
		cv.Reason = fmt.Sprintf("%s; migrate splits only an overridden tenant, so it first leaves its shared bucket for %s (step 1 of 2; run the split below once this move is done)", tooBig, carveTo)
		sp.Action, sp.Command = "split", p.splitCommand(h.Tenant, targets)
		sp.Reason = fmt.Sprintf("step 2 of 2, after the carve-out above, from its override on %s: %s", carveTo, sp.Reason)
		moveTo(targets)
		return []proposal{cv, sp}
	}
	dest := byLoad[0]
	if dest == h.shard {
		dest = byLoad[1]
	}
	mv := base
	mv.Targets = []string{dest}
	mv.Reason = fmt.Sprintf("its share of shard %s reaches the threshold %s; it alone (%.1f/s) fits in a shard's mean load (%.1f/s), so it moves whole to the least-loaded shard", h.shard, pct(p.threshold), h.total, mean)
	switch {
	case t.Overrides[h.Tenant] != "":
		mv.Action = "move"
		mv.Command = fmt.Sprintf("celebrity migrate start --tenant %s --target %s %s %s", shellQuote(h.Tenant), dest, p.shardArg, p.ctl)
	case p.cache:
		mv.Action = "carve-out"
		mv.Command = fmt.Sprintf("celebrity routes override %s %s --cache %s %s", shellQuote(h.Tenant), dest, p.shardArg, p.ctl)
	default:
		mv.Action = "carve-out"
		mv.Command = fmt.Sprintf("celebrity migrate start --carve --tenant %s --target %s %s %s", shellQuote(h.Tenant), dest, p.shardArg, p.ctl)
	}
	moveTo(mv.Targets)
	return []proposal{mv}
}

// reSplit proposes a wider spread for a spread tenant whose sub-buckets are each still
// above the target per-shard load, or nothing when they are not.
func (p proposer) reSplit(h *hotTenant, base proposal, old, byLoad []string, moveTo func([]string)) []proposal {
	per := h.total / float64(len(old))
	if per <= base.TargetPerShard {
		return nil // its share is high only because its shards are quiet: a wider spread evens nothing out
	}
	rs := base
	rs.Action, rs.From, rs.Targets = "re-split", append([]string(nil), old...), []string{}
	if len(old) >= p.bound() {
		rs.Width, rs.PerSub = len(old), per
		rs.Reason = fmt.Sprintf("spread over %d sub-buckets, each %.1f/s, above the target per-shard load %.1f/s (%s of the mean %.1f/s)",
			len(old), per, base.TargetPerShard, pct(p.threshold), base.MeanPerShard)
		rs.Note = fmt.Sprintf("it is spread over as many sub-buckets as plan places (%d: one per shard, at most %d); a wider spread needs more shards", len(old), routing.MaxSpread)
		return []proposal{rs}
	}
	k := max(len(old)+1, p.width(h.total, base.TargetPerShard))
	targets := arrangeResplit(sortedCopy(byLoad[:k]), old)
	rs.Width, rs.Targets, rs.PerSub = k, targets, h.total/float64(k)
	rs.Reason = fmt.Sprintf("spread over %d sub-buckets, each still %.1f/s, above the target per-shard load %.1f/s; %s; new sub-bucket i is never on old sub-bucket i's shard",
		len(old), per, base.TargetPerShard, p.widthReason(h.total, base.TargetPerShard, k))
	if p.cache {
		rs.Action = "spread"
		rs.Command = fmt.Sprintf("celebrity routes spread %s %s --cache %s %s", shellQuote(h.Tenant), strings.Join(targets, ","), p.shardArg, p.ctl)
	} else {
		rs.Command = p.splitCommand(h.Tenant, targets)
	}
	moveTo(targets)
	return []proposal{rs}
}

// widthReason explains a width k for rate against target.
func (p proposer) widthReason(rate, target float64, k int) string {
	s := fmt.Sprintf("%d sub-buckets of %.1f/s each", k, rate/float64(k))
	if rate/float64(k) <= target {
		return s + fmt.Sprintf(" keep it within the target per-shard load %.1f/s (%s of the mean)", target, pct(p.threshold))
	}
	return s + fmt.Sprintf(", the most the %d shards allow (one sub-bucket per shard), still above the target per-shard load %.1f/s", len(p.names), target)
}

func (p proposer) splitCommand(tenant string, targets []string) string {
	return fmt.Sprintf("celebrity migrate start --split --tenant %s --target %s %s %s", shellQuote(tenant), strings.Join(targets, ","), p.shardArg, p.ctl)
}

// arrangeResplit orders the distinct shards of a wider re-split so that new sub-bucket i is
// not on old[i]'s shard (migrate refuses that: the new sub-bucket would be the same keys on
// the same shard). It returns the first rotation of targets that satisfies this; one
// always exists when len(targets) > len(old), since each old sub-bucket rules out one
// rotation only.
func arrangeResplit(targets, old []string) []string {
	n := len(targets)
	for r := range n {
		out := make([]string, n)
		ok := true
		for i := range n {
			out[i] = targets[(i+r)%n]
			if i < len(old) && out[i] == old[i] {
				ok = false
			}
		}
		if ok {
			return out
		}
	}
	return targets // unreachable for a wider spread of distinct shards
}
