package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

// shardLoad is one shard's measured load in a plan.
type shardLoad struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// OpsPerS is every command the shard's servers (every master of a cluster shard) ran per
	// second (INFO deltas over --interval).
	OpsPerS float64 `json:"ops_per_sec"`
	// RoutedPerS is the shard's routed operations per second over --window, as the report's
	// Source counts them.
	RoutedPerS float64 `json:"routed_per_sec"`
	Units      int     `json:"units"`
	// Tenants are the shard's busiest tenants, busiest first (at most 5).
	Tenants []tenantLoad `json:"top_tenants"`
}

// tenantLoad is one tenant's routed operations on one shard.
type tenantLoad struct {
	Tenant     string  `json:"tenant"`
	RoutedPerS float64 `json:"routed_per_sec"`
	// Share is the tenant's part of its shard's routed operations.
	Share float64 `json:"share"`
	// Unit is where the tenant lives on the shard: its bucket, its override or a sub-bucket
	// of its spread (the busiest, if several).
	Unit string `json:"unit"`
}

// proposal is one change plan suggests; it is never run by plan.
type proposal struct {
	Tenant string `json:"tenant"`
	// Source is the shard whose routed operations Share is measured on: where the tenant's
	// bucket or override is, or (a spread tenant) where its share is highest. A split
	// proposed after a carve-out starts from the carve-out's target (its Reason says so).
	Source string `json:"source"`
	// Share is the tenant's part of Source's routed operations.
	Share float64 `json:"share"`
	// RoutedPerS is the tenant's routed operations per second, over every shard it is on.
	RoutedPerS float64 `json:"routed_per_sec"`
	// Action is "move" (an override to another shard), "carve-out" (out of its shared
	// bucket onto one shard), "split" (an override into a spread of Width sub-buckets),
	// "re-split" (a spread to another width), "merge" (a spread that cooled back into one
	// override unit on Targets[0]) or "spread" (a route change, --cache only).
	Action  string   `json:"action"`
	Targets []string `json:"targets"`
	// Width is the number of sub-buckets of a split, re-split or spread (0 otherwise).
	Width int `json:"width,omitempty"`
	// From is a spread tenant's current sub-buckets' shards (a re-split or a merge).
	From []string `json:"from,omitempty"`
	// MeanPerShard is the mean routed operations per second of a shard; TargetPerShard is
	// the part of a shard one tenant should take, --threshold times MeanPerShard. A split
	// or re-split picks the width that brings the tenant's rate per sub-bucket (PerSub) to
	// TargetPerShard or under, bounded by the number of shards and routing.MaxSpread.
	MeanPerShard   float64 `json:"mean_per_shard"`
	TargetPerShard float64 `json:"target_per_shard"`
	PerSub         float64 `json:"per_sub_bucket,omitempty"`
	// Reason says why the proposal is made, with its numbers.
	Reason string `json:"reason"`
	// Command is the exact command that carries the proposal out, or empty when the tool has
	// none for it (see Note). Commands of one tenant run in the order listed.
	Command string `json:"command,omitempty"`
	Note    string `json:"note,omitempty"`
}

// The sources of per-tenant load a plan reads.
const (
	// sourceRouters is the load summary the Routers publish (routing.Options.Load): their Do
	// and Get calls per tenant.
	sourceRouters = "routers"
	// sourceChangeLogs is the units' change logs: every routed write appends one entry.
	sourceChangeLogs = "change-logs"
)

// planReport is what plan prints.
type planReport struct {
	Generation uint64 `json:"generation"`
	// Source says where the per-tenant load comes from: "routers" (the Routers' load
	// summary) or "change-logs" (the units' change logs, read when no summary exists).
	Source string `json:"source"`
	// Routed says what the routed rates count under Source.
	Routed   string `json:"routed"`
	Window   string `json:"window"`
	Interval string `json:"interval"`
	// From and To bound the span the Routers' summary covers (Source "routers" only).
	From   *time.Time  `json:"from,omitempty"`
	To     *time.Time  `json:"to,omitempty"`
	Shards []shardLoad `json:"shards"`
	// Skew is max/mean of the shards' OpsPerS; RoutedSkew the same of RoutedPerS.
	Skew       float64    `json:"skew"`
	RoutedSkew float64    `json:"routed_skew"`
	Proposals  []proposal `json:"proposals"`
	// Truncated lists units whose change log held more than --max-entries entries in the
	// window: their rates are measured over the newest entries only.
	Truncated []string `json:"truncated,omitempty"`
}

// planFlags are plan's flags.
type planFlags struct {
	cf         connFlags
	prefix     string
	shards     string
	source     string
	window     time.Duration
	interval   time.Duration
	threshold  float64
	minRate    float64
	maxEntries int64
	cache      bool
}

func (pf *planFlags) parse(e *env, args []string) error {
	fs := newFlagSet(e, "plan", &pf.cf)
	fs.StringVar(&pf.prefix, "prefix", routing.DefaultPrefix, "routing key `prefix` in the control Redis")
	fs.StringVar(&pf.shards, "shard", "", "shard `addresses` as name=host:port or name=cluster:host:port+...,... (every shard the table names)")
	fs.StringVar(&pf.source, "source", "auto", "per-tenant load from `routers` (the Routers' load summary), change-logs, or auto (the summary if there is one)")
	fs.DurationVar(&pf.window, "window", time.Minute, "how far back per-tenant load is read")
	fs.DurationVar(&pf.interval, "interval", time.Second, "INFO sampling `interval` for each shard's ops/s")
	fs.Float64Var(&pf.threshold, "threshold", 0.5, "propose a change for a tenant whose share of its shard's routed operations reaches this (0..1]")
	fs.Float64Var(&pf.minRate, "min-rate", 1, "ignore tenants under this many routed operations/s")
	fs.Int64Var(&pf.maxEntries, "max-entries", 10_000, "read at most this many change-log entries per unit (change-logs source)")
	fs.BoolVar(&pf.cache, "cache", false, "the shards hold a pure cache: propose route changes that re-load data instead of moving it")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case len(fs.Args()) != 0:
		return usagef("plan takes no arguments, got %q", fs.Args())
	case pf.source != "auto" && pf.source != sourceRouters && pf.source != sourceChangeLogs:
		return usagef("--source must be auto, routers or change-logs, got %q", pf.source)
	case pf.window < time.Second || pf.window > 24*time.Hour:
		return usagef("--window must be 1s..24h, got %v", pf.window)
	case pf.interval < 10*time.Millisecond || pf.interval > time.Hour:
		return usagef("--interval must be 10ms..1h, got %v", pf.interval)
	case !(pf.threshold > 0 && pf.threshold <= 1):
		return usagef("--threshold must be in (0, 1], got %v", pf.threshold)
	case pf.minRate < 0 || math.IsNaN(pf.minRate):
		return usagef("--min-rate must be >= 0, got %v", pf.minRate)
	case pf.maxEntries < 1 || pf.maxEntries > 10_000_000:
		return usagef("--max-entries must be 1..10000000, got %d", pf.maxEntries)
	case pf.shards == "":
		return usagef("plan needs --shard name=host:port,... for every shard the route table names")
	}
	return nil
}

// planner holds what one plan run reads from.
type planner struct {
	e       *env
	pf      *planFlags
	control redis.UniversalClient
	table   *routing.Table
	shards  map[string]redis.UniversalClient
	names   []string // the table's shards, sorted
}

// tenantRates is the per-tenant load a source gives: shard -> tenant -> routed ops/s, and
// the unit each tenant's rate comes from on the shard (its busiest).
type tenantRates struct {
	rate map[string]map[string]float64
	unit map[string]map[string]string
}

func newTenantRates(names []string) tenantRates {
	tr := tenantRates{rate: map[string]map[string]float64{}, unit: map[string]map[string]string{}}
	for _, n := range names {
		tr.rate[n], tr.unit[n] = map[string]float64{}, map[string]string{}
	}
	return tr
}

// add counts r routed ops/s of tenant in unit on shard; the tenant's unit there is the first
// one added (a spread's sub-buckets share its rate evenly).
func (tr tenantRates) add(shard, tenant, unit string, r float64) {
	tr.rate[shard][tenant] += r
	if tr.unit[shard][tenant] == "" {
		tr.unit[shard][tenant] = unit
	}
}

func runPlan(e *env, args []string) error {
	var pf planFlags
	if err := pf.parse(e, args); err != nil {
		return err
	}
	shards, err := parseShards(pf.shards)
	if err != nil {
		return err
	}
	defer closeAll(valuesOf(shards))
	c, err := pf.cf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	p := &planner{e: e, pf: &pf, control: c, shards: shards}
	if err := p.loadTable(); err != nil {
		return err
	}
	rep := planReport{Generation: p.table.Generation, Window: pf.window.String(), Interval: pf.interval.String(), Proposals: []proposal{}}
	ops, err := p.shardOps()
	if err != nil {
		return err
	}
	tr, err := p.tenantLoad(&rep)
	if err != nil {
		return err
	}
	loads := p.shardLoads(&rep, ops, tr)
	rep.Proposals = proposer{table: p.table, names: p.names, threshold: pf.threshold, minRate: pf.minRate,
		cache: pf.cache, shardArg: "--shard " + pf.shards, ctl: pf.cf.flagsFor(pf.prefix)}.propose(loads)
	for _, l := range loads {
		if len(l.Tenants) > 5 {
			l.Tenants = l.Tenants[:5]
		}
		if l.Tenants == nil {
			l.Tenants = []tenantLoad{}
		}
		rep.Shards = append(rep.Shards, *l)
	}
	return printOut(e, pf.cf.json, rep, renderPlan(rep))
}

// loadTable reads the route table and checks that --shard names exactly its shards, and
// that each answers.
func (p *planner) loadTable() error {
	store, err := routing.NewStore(p.control, routing.StoreOptions{Prefix: p.pf.prefix})
	if err != nil {
		return usagef("%v", err)
	}
	t, err := store.Load(p.e.ctx)
	if errors.Is(err, routing.ErrNoTable) {
		return usagef("no route table under prefix %q (wrong --prefix?)", p.pf.prefix)
	}
	if err != nil {
		return err
	}
	for _, s := range t.Shards {
		if p.shards[s] == nil {
			return usagef("--shard has no address for shard %q of the route table (generation %d names %s)", s, t.Generation, strings.Join(t.Shards, ", "))
		}
	}
	for name := range p.shards {
		if !contains(t.Shards, name) {
			return usagef("--shard names %q, which the route table (generation %d) does not have (%s)", name, t.Generation, strings.Join(t.Shards, ", "))
		}
	}
	p.table, p.names = t, sortedCopy(t.Shards)
	for _, n := range p.names {
		pctx, cancel := context.WithTimeout(p.e.ctx, 5*time.Second)
		err := p.shards[n].Ping(pctx).Err()
		cancel()
		if err != nil {
			return fmt.Errorf("cannot reach shard %q at %s: %w", n, shardAddr(p.shards[n]), err)
		}
	}
	return nil
}

// shardOps samples INFO on every master of every shard twice, --interval apart, and returns
// each shard's commands per second (the sum over a cluster shard's masters) and their skew.
func (p *planner) shardOps() (map[string]float64, error) {
	var all []*redis.Client
	shardOf := map[string]string{} // master address -> shard
	defer func() { closeAll(all) }()
	for _, n := range p.names {
		ms, err := masters(p.e.ctx, p.shards[n])
		if err != nil {
			return nil, fmt.Errorf("shard %q: %w", n, err)
		}
		all = append(all, ms...)
		for _, m := range ms {
			shardOf[m.Options().Addr] = n
		}
	}
	first, err := sample(p.e.ctx, all)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.e.ctx.Done():
		return nil, p.e.ctx.Err()
	case <-time.After(p.pf.interval):
	}
	second, err := sample(p.e.ctx, all)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, n := range rates(first, second).Nodes {
		out[shardOf[n.Addr]] += n.OpsPerS
	}
	return out, nil
}

// tenantLoad reads per-tenant load from the source --source picks: the Routers' summary,
// or (with auto, when there is none) the units' change logs. It records the source in rep.
func (p *planner) tenantLoad(rep *planReport) (tenantRates, error) {
	if p.pf.source != sourceChangeLogs {
		l, err := routing.ReadTenantLoad(p.e.ctx, p.control, p.pf.prefix, p.pf.window)
		if err != nil {
			return tenantRates{}, err
		}
		if !l.Empty() {
			rep.Source, rep.Routed = sourceRouters, "Do and Get calls the Routers counted (their load summary)"
			rep.From, rep.To = &l.From, &l.To
			return p.fromSummary(l), nil
		}
		if p.pf.source == sourceRouters {
			return tenantRates{}, usagef("no load summary under prefix %q within its retention: are the Routers running with routing.Options.Load enabled?", p.pf.prefix)
		}
	}
	rep.Source, rep.Routed = sourceChangeLogs, "routed writes in the units' change logs"
	return p.fromChangeLogs(rep)
}

// fromSummary places each tenant of the Routers' summary where the table routes it: its
// override, its bucket's owner, or evenly over its spread's sub-buckets.
func (p *planner) fromSummary(l routing.TenantLoad) tenantRates {
	t := p.table
	tr := newTenantRates(p.names)
	for _, to := range l.Tenants {
		switch {
		case t.Overrides[to.Tenant] != "":
			u := routing.Unit{Kind: routing.KindTenant, Tenant: to.Tenant}
			tr.add(t.Overrides[to.Tenant], to.Tenant, u.String(), to.Rate)
		case len(t.Spreads[to.Tenant]) > 0:
			subs := t.Spreads[to.Tenant]
			for i, s := range subs {
				u := routing.Unit{Kind: routing.KindSpread, Tenant: to.Tenant, Sub: uint32(i)}
				tr.add(s, to.Tenant, u.String(), to.Rate/float64(len(subs)))
			}
		default:
			b := routing.BucketOf(to.Tenant, t.Buckets)
			tr.add(t.BucketOwner(b), to.Tenant, routing.BucketUnit(b).String(), to.Rate)
		}
	}
	return tr
}

// fromChangeLogs counts each unit's change-log entries of the window per tenant: every
// routed write appends one entry.
func (p *planner) fromChangeLogs(rep *planReport) (tenantRates, error) {
	keys := routing.Keys{Prefix: p.pf.prefix}
	tr := newTenantRates(p.names)
	byShard := map[string][]routing.Placement{}
	for _, pl := range p.table.Units() {
		byShard[pl.Shard] = append(byShard[pl.Shard], pl)
	}
	best := newTenantRates(p.names).rate // shard -> tenant -> the rate of its busiest unit
	for _, n := range p.names {
		units := byShard[n]
		logs := make([]string, len(units))
		for i, pl := range units {
			logs[i] = routingfmt.Keys(keys.Tag(pl.Unit)).Log
		}
		counts, truncated, err := logRates(p.e.ctx, p.shards[n], logs, p.pf.window, p.pf.maxEntries)
		if err != nil {
			return tr, fmt.Errorf("read the change logs on shard %q: %w", n, err)
		}
		for i, pl := range units {
			if truncated[i] {
				rep.Truncated = append(rep.Truncated, pl.Unit.String())
			}
			for tenant, r := range counts[i] {
				tr.rate[n][tenant] += r
				if r > best[n][tenant] {
					best[n][tenant], tr.unit[n][tenant] = r, pl.Unit.String()
				}
			}
		}
	}
	return tr, nil
}

// shardLoads builds each shard's load from the INFO rates and the per-tenant rates, and
// sets the report's skews.
func (p *planner) shardLoads(rep *planReport, ops map[string]float64, tr tenantRates) []*shardLoad {
	loads := make([]*shardLoad, len(p.names))
	for i, n := range p.names {
		loads[i] = &shardLoad{Name: n, Addr: shardAddr(p.shards[n]), OpsPerS: ops[n]}
	}
	for _, pl := range p.table.Units() {
		loads[slices.Index(p.names, pl.Shard)].Units++
	}
	var opsSum, opsMax, routedMax float64
	for i, n := range p.names {
		l := loads[i]
		for _, r := range tr.rate[n] {
			l.RoutedPerS += r
		}
		for tenant, r := range tr.rate[n] {
			l.Tenants = append(l.Tenants, tenantLoad{Tenant: tenant, RoutedPerS: r, Share: r / l.RoutedPerS, Unit: tr.unit[n][tenant]})
		}
		sort.Slice(l.Tenants, func(i, j int) bool {
			if l.Tenants[i].RoutedPerS != l.Tenants[j].RoutedPerS {
				return l.Tenants[i].RoutedPerS > l.Tenants[j].RoutedPerS
			}
			return l.Tenants[i].Tenant < l.Tenants[j].Tenant
		})
		opsSum += l.OpsPerS
		opsMax = max(opsMax, l.OpsPerS)
		routedMax = max(routedMax, l.RoutedPerS)
	}
	if opsSum > 0 {
		rep.Skew = opsMax / (opsSum / float64(len(loads)))
	}
	if mean := meanRouted(loads); mean > 0 {
		rep.RoutedSkew = routedMax / mean
	}
	return loads
}

func meanRouted(loads []*shardLoad) float64 {
	var sum float64
	for _, l := range loads {
		sum += l.RoutedPerS
	}
	return sum / float64(len(loads))
}

// logRates counts, for each of one shard's unit change logs, the entries newer than window
// per tenant, as writes per second, reading every log in one pipeline. When a log holds more
// than maxEntries entries in the window, only the newest maxEntries are read and the rate is
// taken over the time they span (truncated reports it).
func logRates(ctx context.Context, c redis.UniversalClient, logs []string, window time.Duration, maxEntries int64) ([]map[string]float64, []bool, error) {
	now, err := c.Time(ctx).Result()
	if err != nil {
		return nil, nil, err
	}
	from := strconv.FormatInt(now.Add(-window).UnixMilli(), 10)
	cmds := make([]*redis.XMessageSliceCmd, len(logs))
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, log := range logs {
			cmds[i] = p.XRevRangeN(ctx, log, "+", from, maxEntries)
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	out := make([]map[string]float64, len(logs))
	truncated := make([]bool, len(logs))
	for i, cmd := range cmds {
		msgs := cmd.Val()
		span := window.Seconds()
		if truncated[i] = int64(len(msgs)) == maxEntries; truncated[i] {
			oldest, _, _ := strings.Cut(msgs[len(msgs)-1].ID, "-")
			if ms, err := strconv.ParseInt(oldest, 10, 64); err == nil {
				span = max(float64(now.UnixMilli()-ms)/1000, 0.001)
			}
		}
		out[i] = map[string]float64{}
		for _, m := range msgs {
			f, _ := m.Values["f"].(string)
			tenant, _, ok := routingfmt.SplitRecordField(f)
			if !ok {
				continue // an entry without a record field (a "noop") names no tenant
			}
			out[i][tenant] += 1 / span
		}
	}
	return out, truncated, nil
}

func renderPlan(r planReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "route table generation %d; ops/s over %s; routed operations over the last %s: %s\n", r.Generation, r.Interval, r.Window, r.Routed)
	if r.From != nil {
		fmt.Fprintf(&b, "load summary from %s to %s\n", r.From.Format(time.RFC3339), r.To.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "\n%-10s %-21s %10s %10s %6s  %s\n", "shard", "address", "ops/s", "routed/s", "units", "busiest tenants (share of the shard's routed operations)")
	for _, s := range r.Shards {
		var ts []string
		for _, t := range s.Tenants {
			ts = append(ts, fmt.Sprintf("%s %s", t.Tenant, pct(t.Share)))
		}
		fmt.Fprintf(&b, "%-10s %-21s %10.0f %10.1f %6d  %s\n", s.Name, s.Addr, s.OpsPerS, s.RoutedPerS, s.Units, strings.Join(ts, ", "))
	}
	fmt.Fprintf(&b, "\nskew (max/mean): ops %.2f, routed %.2f\n", r.Skew, r.RoutedSkew)
	if len(r.Truncated) > 0 {
		fmt.Fprintf(&b, "change logs read in part (--max-entries): %s\n", strings.Join(r.Truncated, ", "))
	}
	if len(r.Proposals) == 0 {
		b.WriteString("\nno tenant crosses the threshold: nothing to propose\n")
		return b.String()
	}
	b.WriteString("\nproposals (nothing was changed; run a command to carry one out):\n")
	for i, p := range r.Proposals {
		onto := "onto " + strings.Join(p.Targets, ", ")
		if len(p.Targets) == 0 {
			onto = "(no runnable step)"
		}
		if p.Width > 0 {
			onto = fmt.Sprintf("%d sub-buckets %s", p.Width, onto)
		}
		fmt.Fprintf(&b, "\n%d. %s: %s of shard %s's routed operations (%.1f/s) -> %s %s\n", i+1, p.Tenant, pct(p.Share), p.Source, p.RoutedPerS, p.Action, onto)
		fmt.Fprintf(&b, "   why: %s\n", p.Reason)
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
