package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/hotkeys"
)

// nodeRate is one master's load over one sampling interval.
type nodeRate struct {
	Addr     string  `json:"addr"`
	OpsPerS  float64 `json:"ops_per_sec"`
	Commands uint64  `json:"commands"`
}

// topFrame is what top shows once per interval.
type topFrame struct {
	At       time.Time   `json:"at"`
	Interval float64     `json:"interval_sec"`
	Nodes    []nodeRate  `json:"nodes"`
	Skew     float64     `json:"skew"` // max/mean of OpsPerS; 1 is perfectly even
	Probes   []probeFreq `json:"probes,omitempty"`
	// HotSet is the fleet's hot set as the celebrity.Cache instances publish it.
	HotSet *hotSet `json:"hot_set,omitempty"`
	// Capabilities say what each node offers for server-side probes (an LFU policy for
	// OBJECT FREQ, the HOTKEYS command); CapabilitiesError is why they are unknown.
	Capabilities      []hotkeys.NodeCapability `json:"capabilities,omitempty"`
	CapabilitiesError string                   `json:"capabilities_error,omitempty"`
	// TopKeys are the keys with the highest LFU counters found by SCAN (--scan).
	TopKeys      []hotkeys.ServerKey `json:"top_keys,omitempty"`
	TopKeysError string              `json:"top_keys_error,omitempty"`
}

// probeFreq is the server's own LFU counter for one key (OBJECT FREQ): Key as the operator
// gave it, Stored the Redis key probed (for a logical key of the Cache, its record's key).
type probeFreq struct {
	Key    string `json:"key"`
	Stored string `json:"stored"`
	Freq   int64  `json:"freq"`
	Error  string `json:"error,omitempty"`
}

func runTop(e *env, args []string) error {
	var cf connFlags
	fs := newFlagSet(e, "top", &cf)
	interval := fs.Duration("interval", time.Second, "sampling `interval`")
	once := fs.Bool("once", false, "print one sample and exit (no screen refresh)")
	frames := fs.Int("frames", 0, "stop after this many frames (0: until interrupted)")
	probeFlag := fs.String("probe", "", "comma-separated logical `keys` of the Cache under --cache-prefix whose stored records to probe with OBJECT FREQ (needs an LFU maxmemory-policy)")
	probeRaw := fs.String("probe-raw", "", "comma-separated Redis `keys` to probe with OBJECT FREQ as they are")
	scan := fs.Int("scan", 0, "show the `n` keys with the highest LFU counters, found by SCAN on every node (needs an LFU maxmemory-policy; 0: off)")
	scanLimit := fs.Int("scan-limit", 1000, "keys SCAN reads per node and frame for --scan")
	cachePrefix := fs.String("cache-prefix", celebrity.DefaultPrefix, "celebrity.Cache `prefix` whose fleet hot set to show (Options.Prefix); \"\" to skip")
	reportInterval := fs.Duration("report-interval", celebrity.DefaultReportInterval, "the fleet's Options.Loop.ReportInterval, to read its current rates")
	summaryShards := fs.Int("summary-shards", celebrity.DefaultSummaryShards, "the fleet's Options.Loop.SummaryShards, to read its current rates")
	demoted := fs.Duration("demoted", time.Minute, "show the demotions decided within this `window` (the fleet keeps them for max(Hold, 1m) after its last one); 0 hides them")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cachePrefix != "" && (strings.ContainsAny(*cachePrefix, "{}") || len(*cachePrefix) > 128) {
		return usagef("--cache-prefix must be 1..128 bytes without '{' or '}', got %q", *cachePrefix)
	}
	if *probeFlag != "" && *cachePrefix == "" {
		return usagef("--probe names logical keys of the Cache under --cache-prefix, which is \"\"; give --probe-raw for Redis keys")
	}
	if *reportInterval < time.Millisecond || *reportInterval > time.Hour || *summaryShards < 1 || *summaryShards > 1024 {
		return usagef("--report-interval must be 1ms..1h and --summary-shards 1..1024 (the fleet's options), got %v and %d", *reportInterval, *summaryShards)
	}
	if *demoted < 0 || *demoted > 24*time.Hour {
		return usagef("--demoted must be 0..24h, got %v", *demoted)
	}
	var probes []probeFreq
	for _, k := range splitList(*probeFlag) {
		probes = append(probes, probeFreq{Key: k, Stored: celebrity.RecordKey(*cachePrefix, k)})
	}
	for _, k := range splitList(*probeRaw) {
		probes = append(probes, probeFreq{Key: k, Stored: k})
	}
	if *scan < 0 || *scan > 1000 || *scanLimit < 1 || *scanLimit > 1_000_000 {
		return usagef("--scan must be 0..1000 and --scan-limit 1..1000000, got %d and %d", *scan, *scanLimit)
	}
	if *interval < 10*time.Millisecond || *interval > time.Hour {
		return usagef("--interval must be 10ms..1h, got %v", *interval)
	}
	if *once {
		*frames = 1
	}
	c, err := cf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ms, err := masters(e.ctx, c)
	if err != nil {
		return err
	}
	defer closeAll(ms)
	prev, err := sample(e.ctx, ms)
	if err != nil {
		return err
	}
	probe, err := hotkeys.NewProbe(c)
	if err != nil {
		return err
	}
	caps, capsErr := probe.Capabilities(e.ctx)
	for n := 0; *frames == 0 || n < *frames; n++ {
		select {
		case <-e.ctx.Done():
			return nil
		case <-time.After(*interval):
		}
		cur, err := sample(e.ctx, ms)
		if err != nil {
			return err
		}
		f := rates(prev, cur)
		f.Probes = probeKeys(e.ctx, c, probes)
		f.Capabilities = caps
		if capsErr != nil {
			f.CapabilitiesError = capsErr.Error()
		}
		if *scan > 0 {
			if f.TopKeys, err = probe.ScanTop(e.ctx, hotkeys.ScanOptions{Limit: *scanLimit, K: *scan}); err != nil {
				f.TopKeysError = err.Error()
			}
		}
		if *cachePrefix != "" {
			q := hotSetQuery{prefix: *cachePrefix, reportInterval: *reportInterval, summaryShards: *summaryShards, demotedWithin: *demoted}
			if f.HotSet, err = readHotSet(e.ctx, c, q); err != nil {
				return err
			}
		}
		prev = cur
		if cf.json {
			if err := printJSON(e.stdout, f); err != nil {
				return err
			}
			continue
		}
		if !*once {
			fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home and clear: refresh in place
		}
		fmt.Fprint(e.stdout, renderTop(f, 40))
	}
	return nil
}

// counts is one reading of every master's total_commands_processed.
type counts struct {
	at   time.Time
	cmds map[string]uint64
}

func sample(ctx context.Context, ms []*redis.Client) (counts, error) {
	cs := counts{at: time.Now(), cmds: make(map[string]uint64, len(ms))}
	for _, m := range ms {
		info, err := m.Info(ctx, "stats").Result()
		if err != nil {
			return cs, fmt.Errorf("INFO stats on %s: %w", m.Options().Addr, err)
		}
		n, ok := infoField(info, "total_commands_processed")
		if !ok {
			return cs, fmt.Errorf("INFO stats on %s has no total_commands_processed", m.Options().Addr)
		}
		cs.cmds[m.Options().Addr] = n
	}
	return cs, nil
}

func infoField(info, name string) (uint64, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// rates turns two readings into per-node ops/s and the skew (max/mean).
func rates(prev, cur counts) topFrame {
	dt := cur.at.Sub(prev.at).Seconds()
	f := topFrame{At: cur.at, Interval: dt}
	var sum, max float64
	for addr, n := range cur.cmds {
		d := n - min(n, prev.cmds[addr])
		r := float64(d) / dt
		f.Nodes = append(f.Nodes, nodeRate{Addr: addr, OpsPerS: r, Commands: d})
		sum += r
		max = maxf(max, r)
	}
	sort.Slice(f.Nodes, func(i, j int) bool { return f.Nodes[i].Addr < f.Nodes[j].Addr })
	if sum > 0 {
		f.Skew = max / (sum / float64(len(f.Nodes)))
	}
	return f
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

func probeKeys(ctx context.Context, c redis.UniversalClient, probes []probeFreq) []probeFreq {
	out := make([]probeFreq, 0, len(probes))
	for _, p := range probes {
		n, err := c.ObjectFreq(ctx, p.Stored).Result()
		switch {
		case errors.Is(err, redis.Nil):
			p.Error = "no such key"
		case err != nil:
			p.Error = err.Error()
		}
		p.Freq = n
		out = append(out, p)
	}
	return out
}

// renderTop draws one frame: a bar per node scaled to the busiest, then the skew.
func renderTop(f topFrame, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "celebrity top — %d node(s), %.1fs interval\n\n", len(f.Nodes), f.Interval)
	var max float64
	for _, n := range f.Nodes {
		max = maxf(max, n.OpsPerS)
	}
	for _, n := range f.Nodes {
		fill := 0
		if max > 0 {
			fill = int(n.OpsPerS/max*float64(width) + 0.5)
		}
		fmt.Fprintf(&b, "%-21s %10.0f ops/s  %s%s\n", n.Addr, n.OpsPerS,
			strings.Repeat("█", fill), strings.Repeat("·", width-fill))
	}
	verdict := "even"
	switch {
	case f.Skew >= 2:
		verdict = "one node is carrying the load: look for a hot key"
	case f.Skew >= 1.2:
		verdict = "uneven"
	case f.Skew == 0:
		verdict = "idle"
	}
	fmt.Fprintf(&b, "\nskew (max/mean): %.2f  %s\n", f.Skew, verdict)
	for _, p := range f.Probes {
		name := p.Key
		if p.Stored != p.Key {
			name += " (stored as " + p.Stored + ")"
		}
		if p.Error != "" {
			fmt.Fprintf(&b, "OBJECT FREQ %s: %s\n", name, p.Error)
			continue
		}
		fmt.Fprintf(&b, "OBJECT FREQ %s: %d\n", name, p.Freq)
	}
	if len(f.Capabilities) > 0 {
		b.WriteString("\nserver-side probes:")
		for _, c := range f.Capabilities {
			fmt.Fprintf(&b, " %s %s (OBJECT FREQ %s, HOTKEYS %s);", c.Node, c.Policy, yesNo(c.ObjectFreq), yesNo(c.Hotkeys))
		}
		b.WriteString("\n")
	}
	if f.TopKeysError != "" {
		fmt.Fprintf(&b, "hottest keys: %s\n", f.TopKeysError)
	}
	if len(f.TopKeys) > 0 {
		b.WriteString("hottest keys by the servers' LFU counters:\n")
		for _, k := range f.TopKeys {
			fmt.Fprintf(&b, "  %-32s %3d  %s\n", k.Key, k.Freq, k.Node)
		}
	}
	if f.HotSet != nil {
		renderHotSet(&b, f.HotSet)
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
