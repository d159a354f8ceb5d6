package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/routing"
)

// shardLoad is one shard's measured load in a plan.
type shardLoad struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// OpsPerS is every command the server ran per second (INFO deltas over --interval).
	OpsPerS float64 `json:"ops_per_sec"`
	// WritesPerS is the routed writes per second its units' change logs recorded over --window.
	WritesPerS float64 `json:"writes_per_sec"`
	Units      int     `json:"units"`
	// Tenants are the tenants with writes on the shard, busiest first (at most 5).
	Tenants []tenantLoad `json:"top_tenants"`
}

// tenantLoad is one tenant's writes on one shard.
type tenantLoad struct {
	Tenant     string  `json:"tenant"`
	WritesPerS float64 `json:"writes_per_sec"`
	// Share is the tenant's part of its shard's routed writes.
	Share float64 `json:"share"`
	// Unit is where the tenant lives on the shard: its bucket, its override or a sub-bucket
	// of its spread (the busiest, if several).
	Unit string `json:"unit"`
}

// proposal is one change plan suggests; it is never run by plan.
type proposal struct {
	Tenant     string   `json:"tenant"`
	Source     string   `json:"source"`
	Share      float64  `json:"share"`
	WritesPerS float64  `json:"writes_per_sec"`
	Action     string   `json:"action"` // "move", "bucket-move", "carve-out" or "spread"
	Targets    []string `json:"targets"`
	// Command is the exact command that carries the proposal out, or empty when the tool has
	// none for it (see Note).
	Command string `json:"command,omitempty"`
	Note    string `json:"note,omitempty"`
}

// planReport is what plan prints.
type planReport struct {
	Generation uint64      `json:"generation"`
	Window     string      `json:"window"`
	Interval   string      `json:"interval"`
	Shards     []shardLoad `json:"shards"`
	// Skew is max/mean of the shards' OpsPerS; WriteSkew the same of WritesPerS.
	Skew      float64    `json:"skew"`
	WriteSkew float64    `json:"write_skew"`
	Proposals []proposal `json:"proposals"`
	// Truncated lists units whose change log held more than --max-entries entries in the
	// window: their rates are measured over the newest entries only.
	Truncated []string `json:"truncated,omitempty"`
}

func runPlan(e *env, args []string) error {
	var cf connFlags
	fs := newFlagSet(e, "plan", &cf)
	prefix := fs.String("prefix", routing.DefaultPrefix, "routing key `prefix` in the control Redis")
	shardsFlag := fs.String("shard", "", "shard `addresses` as name=host:port,... (every shard the table names)")
	window := fs.Duration("window", time.Minute, "how far back the units' change logs are read for per-tenant writes")
	interval := fs.Duration("interval", time.Second, "INFO sampling `interval` for each shard's ops/s")
	threshold := fs.Float64("threshold", 0.5, "propose a change for a tenant whose share of its shard's writes reaches this (0..1]")
	minRate := fs.Float64("min-rate", 1, "ignore tenants under this many writes/s")
	maxEntries := fs.Int64("max-entries", 10_000, "read at most this many change-log entries per unit")
	cache := fs.Bool("cache", false, "the shards hold a pure cache: propose route changes that re-load data instead of moving it")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case len(fs.Args()) != 0:
		return usagef("plan takes no arguments, got %q", fs.Args())
	case *window < time.Second || *window > 24*time.Hour:
		return usagef("--window must be 1s..24h, got %v", *window)
	case *interval < 10*time.Millisecond || *interval > time.Hour:
		return usagef("--interval must be 10ms..1h, got %v", *interval)
	case !(*threshold > 0 && *threshold <= 1):
		return usagef("--threshold must be in (0, 1], got %v", *threshold)
	case *minRate < 0 || math.IsNaN(*minRate):
		return usagef("--min-rate must be >= 0, got %v", *minRate)
	case *maxEntries < 1 || *maxEntries > 10_000_000:
		return usagef("--max-entries must be 1..10000000, got %d", *maxEntries)
	case *shardsFlag == "":
		return usagef("plan needs --shard name=host:port,... for every shard the route table names")
	}
	shards, err := parseShards(*shardsFlag)
	if err != nil {
		return err
	}
	defer closeAll(valuesOf(shards))
	c, err := cf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	store, err := routing.NewStore(c, routing.StoreOptions{Prefix: *prefix})
	if err != nil {
		return usagef("%v", err)
	}
	t, err := store.Load(e.ctx)
	if errors.Is(err, routing.ErrNoTable) {
		return usagef("no route table under prefix %q (wrong --prefix?)", *prefix)
	}
	if err != nil {
		return err
	}
	for _, s := range t.Shards {
		if shards[s] == nil {
			return usagef("--shard has no address for shard %q of the route table (generation %d names %s)", s, t.Generation, strings.Join(t.Shards, ", "))
		}
	}
	for name := range shards {
		if !contains(t.Shards, name) {
			return usagef("--shard names %q, which the route table (generation %d) does not have (%s)", name, t.Generation, strings.Join(t.Shards, ", "))
		}
	}
	names := append([]string(nil), t.Shards...)
	sort.Strings(names)
	ms := make([]*redis.Client, len(names))
	for i, n := range names {
		ms[i] = shards[n]
		pctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		err := ms[i].Ping(pctx).Err()
		cancel()
		if err != nil {
			return fmt.Errorf("cannot reach shard %q at %s: %w", n, ms[i].Options().Addr, err)
		}
	}

	rep := planReport{Generation: t.Generation, Window: window.String(), Interval: interval.String(), Proposals: []proposal{}}
	first, err := sample(e.ctx, ms)
	if err != nil {
		return err
	}
	select {
	case <-e.ctx.Done():
		return e.ctx.Err()
	case <-time.After(*interval):
	}
	second, err := sample(e.ctx, ms)
	if err != nil {
		return err
	}
	ops := rates(first, second)
	rep.Skew = ops.Skew
	opsOf := map[string]float64{}
	for _, n := range ops.Nodes {
		opsOf[n.Addr] = n.OpsPerS
	}

	// Per-tenant writes from the units' change logs: every routed write appends one entry.
	keys := routing.Keys{Prefix: *prefix}
	perShard := map[string]map[string]float64{} // shard -> tenant -> writes/s
	unitOf := map[string]map[string]string{}    // shard -> tenant -> busiest unit
	unitRate := map[string]map[string]float64{}
	loads := map[string]*shardLoad{}
	for _, n := range names {
		loads[n] = &shardLoad{Name: n, Addr: shards[n].Options().Addr, OpsPerS: opsOf[shards[n].Options().Addr]}
		perShard[n], unitOf[n], unitRate[n] = map[string]float64{}, map[string]string{}, map[string]float64{}
	}
	for _, p := range t.Units() {
		sh := shards[p.Shard]
		loads[p.Shard].Units++
		counts, truncated, err := logRates(e.ctx, sh, keys.Unit(p.Unit).Log, *window, *maxEntries)
		if err != nil {
			return fmt.Errorf("read the change log of %s on shard %q: %w", p.Unit, p.Shard, err)
		}
		if truncated {
			rep.Truncated = append(rep.Truncated, p.Unit.String())
		}
		for tenant, r := range counts {
			perShard[p.Shard][tenant] += r
			loads[p.Shard].WritesPerS += r
			if r > unitRate[p.Shard][tenant] {
				unitRate[p.Shard][tenant], unitOf[p.Shard][tenant] = r, p.Unit.String()
			}
		}
	}
	var totalWrites, maxWrites float64
	for _, n := range names {
		l := loads[n]
		for tenant, r := range perShard[n] {
			l.Tenants = append(l.Tenants, tenantLoad{Tenant: tenant, WritesPerS: r, Share: r / l.WritesPerS, Unit: unitOf[n][tenant]})
		}
		sort.Slice(l.Tenants, func(i, j int) bool {
			if l.Tenants[i].WritesPerS != l.Tenants[j].WritesPerS {
				return l.Tenants[i].WritesPerS > l.Tenants[j].WritesPerS
			}
			return l.Tenants[i].Tenant < l.Tenants[j].Tenant
		})
		totalWrites += l.WritesPerS
		maxWrites = max(maxWrites, l.WritesPerS)
	}
	meanWrites := totalWrites / float64(len(names))
	if totalWrites > 0 {
		rep.WriteSkew = maxWrites / meanWrites
	}

	// Proposals, busiest tenant first; each one's load counts on its targets for the next.
	projected := map[string]float64{}
	for _, n := range names {
		projected[n] = loads[n].WritesPerS
	}
	var hot []tenantLoad
	source := map[string]string{}
	for _, n := range names {
		for _, tl := range loads[n].Tenants {
			if _, spread := t.Spreads[tl.Tenant]; !spread && tl.WritesPerS >= *minRate && tl.Share >= *threshold && len(names) > 1 {
				hot = append(hot, tl)
				source[tl.Tenant] = n
			}
		}
	}
	sort.Slice(hot, func(i, j int) bool { return hot[i].WritesPerS > hot[j].WritesPerS })
	ctl := cf.flagsFor(*prefix)
	shardArg := "--shard " + *shardsFlag
	for _, tl := range hot {
		src := source[tl.Tenant]
		p := proposal{Tenant: tl.Tenant, Source: src, Share: tl.Share, WritesPerS: tl.WritesPerS}
		byLoad := append([]string(nil), names...)
		sort.SliceStable(byLoad, func(i, j int) bool { return projected[byLoad[i]] < projected[byLoad[j]] })
		overridden := t.Overrides[tl.Tenant] != ""
		if k := int(math.Ceil(tl.WritesPerS / meanWrites)); tl.WritesPerS > meanWrites {
			// The tenant alone writes more than a shard's fair share: moving it whole only
			// moves the hot spot. Spread it over the least-loaded shards.
			k = min(len(names), max(2, k+1))
			p.Action, p.Targets = "spread", sortedCopy(byLoad[:k])
			if *cache {
				p.Command = fmt.Sprintf("celebrity routes spread %s %s --cache %s %s", shellQuote(tl.Tenant), strings.Join(p.Targets, ","), shardArg, ctl)
			} else {
				p.Note = "migrate cannot split a tenant that has records into a spread yet; until it can, the carve-out or bucket move below is the runnable step"
				rep.Proposals = append(rep.Proposals, p)
				p = proposal{Tenant: tl.Tenant, Source: src, Share: tl.Share, WritesPerS: tl.WritesPerS}
			}
		}
		if p.Action == "" {
			target := byLoad[0]
			if target == src {
				target = byLoad[1]
			}
			p.Targets = []string{target}
			switch {
			case overridden:
				p.Action = "move"
				p.Command = fmt.Sprintf("celebrity migrate start --tenant %s --target %s %s %s", shellQuote(tl.Tenant), target, shardArg, ctl)
			case *cache:
				p.Action = "carve-out"
				p.Command = fmt.Sprintf("celebrity routes override %s %s --cache %s %s", shellQuote(tl.Tenant), target, shardArg, ctl)
			default:
				p.Action = "bucket-move"
				b := routing.BucketOf(tl.Tenant, t.Buckets)
				p.Command = fmt.Sprintf("celebrity migrate start --bucket %d --target %s %s %s", b, target, shardArg, ctl)
				p.Note = fmt.Sprintf("the tenant has records in bucket %d and migrate has no carve-out of one tenant from its bucket: the bucket moves with every tenant in it (%s of the shard's writes are %s's)",
					b, pct(tl.Share), tl.Tenant)
			}
			projected[target] += tl.WritesPerS
			projected[src] -= tl.WritesPerS
		} else {
			for _, s := range p.Targets {
				projected[s] += tl.WritesPerS / float64(len(p.Targets))
			}
			projected[src] -= tl.WritesPerS
		}
		rep.Proposals = append(rep.Proposals, p)
	}
	for _, n := range names {
		if len(loads[n].Tenants) > 5 {
			loads[n].Tenants = loads[n].Tenants[:5]
		}
		if loads[n].Tenants == nil {
			loads[n].Tenants = []tenantLoad{}
		}
		rep.Shards = append(rep.Shards, *loads[n])
	}
	return printOut(e, cf.json, rep, renderPlan(rep))
}

// logRates counts the entries of a unit's change log newer than window per tenant, as writes
// per second. When the log holds more than max entries in the window, only the newest max
// are read and the rate is taken over the time they span.
func logRates(ctx context.Context, c *redis.Client, log string, window time.Duration, maxEntries int64) (map[string]float64, bool, error) {
	now, err := c.Time(ctx).Result()
	if err != nil {
		return nil, false, err
	}
	from := now.Add(-window).UnixMilli()
	msgs, err := c.XRevRangeN(ctx, log, "+", strconv.FormatInt(from, 10), maxEntries).Result()
	if err != nil {
		return nil, false, err
	}
	span := window.Seconds()
	truncated := int64(len(msgs)) == maxEntries
	if truncated {
		oldest, _, _ := strings.Cut(msgs[len(msgs)-1].ID, "-")
		if ms, err := strconv.ParseInt(oldest, 10, 64); err == nil {
			span = max(float64(now.UnixMilli()-ms)/1000, 0.001)
		}
	}
	out := map[string]float64{}
	for _, m := range msgs {
		f, _ := m.Values["f"].(string)
		tenant, _, ok := routing.SplitRecordField(f)
		if !ok {
			continue // an entry without a record field (a "noop") names no tenant
		}
		out[tenant] += 1 / span
	}
	return out, truncated, nil
}

func renderPlan(r planReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "route table generation %d; ops/s over %s, routed writes over the last %s\n\n", r.Generation, r.Interval, r.Window)
	fmt.Fprintf(&b, "%-10s %-21s %10s %10s %6s  %s\n", "shard", "address", "ops/s", "writes/s", "units", "busiest tenants (share of the shard's writes)")
	for _, s := range r.Shards {
		var ts []string
		for _, t := range s.Tenants {
			ts = append(ts, fmt.Sprintf("%s %s", t.Tenant, pct(t.Share)))
		}
		fmt.Fprintf(&b, "%-10s %-21s %10.0f %10.1f %6d  %s\n", s.Name, s.Addr, s.OpsPerS, s.WritesPerS, s.Units, strings.Join(ts, ", "))
	}
	fmt.Fprintf(&b, "\nskew (max/mean): ops %.2f, writes %.2f\n", r.Skew, r.WriteSkew)
	if len(r.Truncated) > 0 {
		fmt.Fprintf(&b, "change logs read in part (--max-entries): %s\n", strings.Join(r.Truncated, ", "))
	}
	if len(r.Proposals) == 0 {
		b.WriteString("\nno tenant crosses the threshold: nothing to propose\n")
		return b.String()
	}
	b.WriteString("\nproposals (nothing was changed; run a command to carry one out):\n")
	for i, p := range r.Proposals {
		fmt.Fprintf(&b, "\n%d. %s: %s of shard %s's writes (%.1f/s) -> %s onto %s\n", i+1, p.Tenant, pct(p.Share), p.Source, p.WritesPerS, p.Action, strings.Join(p.Targets, ", "))
		if p.Note != "" {
			fmt.Fprintf(&b, "   note: %s\n", p.Note)
		}
		if p.Command != "" {
			fmt.Fprintf(&b, "   %s\n", p.Command)
		}
	}
	return b.String()
}

// flagsFor returns the control Redis flags as the operator gave them, for printed commands.
func (cf *connFlags) flagsFor(prefix string) string {
	s := "--addr " + cf.addr
	if cf.cluster != "" {
		s = "--cluster " + cf.cluster
	}
	if prefix != routing.DefaultPrefix {
		s += " --prefix " + shellQuote(prefix)
	}
	return s
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func sortedCopy(ss []string) []string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}
