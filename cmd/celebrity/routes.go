package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

// routesFlags are the flags of every routes subcommand.
type routesFlags struct {
	connFlags
	prefix string
	yes    bool
	cache  bool
	shards string
}

func (rf *routesFlags) flagSet(e *env, name string) *flag.FlagSet {
	fs := newFlagSet(e, "routes "+name, &rf.connFlags)
	fs.StringVar(&rf.prefix, "prefix", routing.DefaultPrefix, "routing key `prefix` in the control Redis")
	if name != "show" {
		fs.BoolVar(&rf.yes, "yes", false, "publish without asking for confirmation")
		fs.BoolVar(&rf.cache, "cache", false, "the shards hold a pure cache: allow a change that moves existing units (their data is re-loaded, not moved)")
		fs.StringVar(&rf.shards, "shard", "", "shard `addresses` as name=host:port or name=cluster:host:port+...,... to check that a newly placed tenant has no records left behind")
	}
	return fs
}

func runRoutes(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("routes: give a subcommand: show | diff | init | override | spread | publish")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "show", "diff", "init", "override", "spread", "publish":
	default:
		return usagef("routes: unknown subcommand %q (show | diff | init | override | spread | publish)", sub)
	}
	var rf routesFlags
	fs := rf.flagSet(e, sub)
	buckets := fs.Uint("buckets", 0, "number of buckets B (init)")
	file := fs.String("file", "", "route table `JSON` file (diff, publish)")
	if err := parse(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	plan := func(cur *routing.Table) (*routing.Table, error) { return nil, nil }
	switch sub {
	case "show":
		if len(pos) != 0 {
			return usagef("routes show takes no arguments, got %q", pos)
		}
	case "init":
		if len(pos) == 0 || *buckets == 0 || *buckets > 1<<20 {
			return usagef("routes init --buckets B SHARD... (B 1..1048576, at least one shard)")
		}
		plan = func(cur *routing.Table) (*routing.Table, error) {
			if cur != nil {
				return nil, fmt.Errorf("a route table exists (generation %d); init only creates the first", cur.Generation)
			}
			return routing.EvenTable(1, uint32(*buckets), pos...), nil
		}
	case "override":
		if len(pos) != 2 {
			return usagef("routes override TENANT SHARD")
		}
		if err := checkName("tenant", pos[0]); err != nil {
			return err
		}
		plan = nextWith(func(t *routing.Table) { t.SetOverride(pos[0], pos[1]) })
	case "spread":
		if len(pos) != 2 {
			return usagef("routes spread TENANT SHARD1,SHARD2,...")
		}
		if err := checkName("tenant", pos[0]); err != nil {
			return err
		}
		ss := splitList(pos[1])
		if len(ss) < 2 {
			return usagef("routes spread: a spread needs at least 2 sub-buckets, got %d", len(ss))
		}
		plan = nextWith(func(t *routing.Table) { t.SetSpread(pos[0], ss) })
	case "diff", "publish":
		if *file == "" || len(pos) != 0 {
			return usagef("routes %s --file table.json", sub)
		}
		next, err := readTable(*file)
		if err != nil {
			return err
		}
		plan = func(*routing.Table) (*routing.Table, error) { return next, nil }
	}
	return rf.apply(e, sub, plan)
}

func nextWith(change func(*routing.Table)) func(*routing.Table) (*routing.Table, error) {
	return func(cur *routing.Table) (*routing.Table, error) {
		if cur == nil {
			return nil, errors.New("no route table is published yet: run 'celebrity routes init' first")
		}
		next := cur.Next()
		change(next)
		return next, nil
	}
}

// checkName refuses what the route table's JSON would not keep byte for byte.
func checkName(what, s string) error {
	if s == "" || len(s) > 1024 || !utf8.ValidString(s) {
		return usagef("%s %q must be 1..1024 bytes of valid UTF-8", what, s)
	}
	return nil
}

func readTable(path string) (*routing.Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("read table: %v", err)
	}
	var t routing.Table
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, usagef("table %s is not a route table: %v", path, err)
	}
	return &t, nil
}

// apply loads the current table, shows it or the planned change, checks the change is safe,
// asks for confirmation and publishes it.
func (rf *routesFlags) apply(e *env, sub string, plan func(*routing.Table) (*routing.Table, error)) error {
	c, err := rf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	store, err := routing.NewStore(c, routing.StoreOptions{Prefix: rf.prefix})
	if err != nil {
		return usagef("%v", err)
	}
	cur, err := store.Load(e.ctx)
	if errors.Is(err, routing.ErrNoTable) {
		cur, err = nil, nil
		if sub == "show" {
			return fmt.Errorf("no route table under prefix %q (wrong --prefix, or run 'celebrity routes init')", rf.prefix)
		}
	}
	if err != nil {
		return err
	}
	if sub == "show" {
		return rf.show(e, cur)
	}
	next, err := plan(cur)
	if err != nil {
		return usagef("%v", err)
	}
	if err := next.Validate(); err != nil {
		return usagef("%v", err)
	}
	d := diffTables(cur, next)
	if err := rf.safe(e.ctx, cur, next, d); err != nil {
		return err
	}
	if rf.json {
		if err := printJSON(e.stdout, map[string]any{"from": genOf(cur), "to": next.Generation, "changes": d}); err != nil {
			return err
		}
	} else {
		fmt.Fprint(e.stdout, renderDiff(cur, next, d))
	}
	if sub == "diff" {
		return nil
	}
	if len(d) == 0 {
		return usagef("nothing to publish: generation %d would change no placement", next.Generation)
	}
	if !rf.yes && !confirm(e, fmt.Sprintf("publish generation %d?", next.Generation)) {
		return usagef("not published (answer 'yes' to publish, or pass --yes)")
	}
	if err := store.Publish(e.ctx, next); err != nil {
		return err
	}
	if !rf.json {
		fmt.Fprintf(e.stdout, "published generation %d\n", next.Generation)
	}
	return nil
}

func genOf(t *routing.Table) uint64 {
	if t == nil {
		return 0
	}
	return t.Generation
}

func confirm(e *env, q string) bool {
	fmt.Fprintf(e.stderr, "%s [yes/no] ", q)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	return strings.TrimSpace(line) == "yes"
}

func (rf *routesFlags) show(e *env, t *routing.Table) error {
	if rf.json {
		return printJSON(e.stdout, t)
	}
	fmt.Fprintf(e.stdout, "generation %d, %d buckets, shards %s\n", t.Generation, t.Buckets, strings.Join(t.Shards, ", "))
	for _, r := range t.Ranges {
		fmt.Fprintf(e.stdout, "  buckets %d..%d -> %s\n", r.First, r.Last, r.Shard)
	}
	for _, tenant := range sortedKeys(t.Overrides) {
		fmt.Fprintf(e.stdout, "  override %q -> %s\n", tenant, t.Overrides[tenant])
	}
	for _, tenant := range sortedKeys(t.Spreads) {
		fmt.Fprintf(e.stdout, "  spread %q -> %s\n", tenant, strings.Join(t.Spreads[tenant], ", "))
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// change is one unit whose placement differs between two tables.
type change struct {
	Unit   string `json:"unit"`
	From   string `json:"from,omitempty"` // "" for a unit the old table did not have
	To     string `json:"to,omitempty"`   // "" for a unit the new table drops
	kind   routing.UnitKind
	tenant string
}

// diffTables lists every unit whose shard differs, in the tables' unit order.
func diffTables(cur, next *routing.Table) []change {
	old := map[routing.Unit]string{}
	if cur != nil {
		for _, p := range cur.Units() {
			old[p.Unit] = p.Shard
		}
	}
	var d []change
	seen := map[routing.Unit]bool{}
	for _, p := range next.Units() {
		seen[p.Unit] = true
		if old[p.Unit] != p.Shard {
			d = append(d, change{Unit: p.Unit.String(), From: old[p.Unit], To: p.Shard, kind: p.Unit.Kind, tenant: p.Unit.Tenant})
		}
	}
	if cur != nil {
		for _, p := range cur.Units() {
			if !seen[p.Unit] {
				d = append(d, change{Unit: p.Unit.String(), From: p.Shard, kind: p.Unit.Kind, tenant: p.Unit.Tenant})
			}
		}
	}
	return d
}

func renderDiff(cur, next *routing.Table, d []change) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d -> %d: %d placement change(s)\n", genOf(cur), next.Generation, len(d))
	for _, c := range d {
		switch {
		case c.From == "":
			fmt.Fprintf(&b, "  + %s -> %s\n", c.Unit, c.To)
		case c.To == "":
			fmt.Fprintf(&b, "  - %s (was on %s)\n", c.Unit, c.From)
		default:
			fmt.Fprintf(&b, "  ~ %s: %s -> %s\n", c.Unit, c.From, c.To)
		}
	}
	return b.String()
}

// safe refuses a change that would hide data from routing: an existing unit moved or dropped
// (its records stay behind on the old shard; that is a migration), or a tenant newly placed
// while it still has records in its bucket. --cache allows both for pure caches.
func (rf *routesFlags) safe(ctx context.Context, cur, next *routing.Table, d []change) error {
	if cur == nil || rf.cache {
		return nil
	}
	for _, c := range d {
		if c.From != "" {
			return fmt.Errorf("refused: %s has its data on %s; changing its placement by a publish would leave that data behind. "+
				"Move it with 'celebrity migrate start' (or pass --cache if the shards hold only a cache)", c.Unit, c.From)
		}
	}
	shards, err := parseShards(rf.shards)
	if err != nil {
		return err
	}
	defer closeAll(valuesOf(shards))
	checked := map[string]bool{}
	for _, c := range d {
		if c.kind == routing.KindBucket || checked[c.tenant] {
			continue
		}
		checked[c.tenant] = true
		if err := tenantHasNoRecords(ctx, cur, rf.prefix, c.tenant, shards); err != nil {
			return err
		}
	}
	return nil
}

// tenantHasNoRecords checks the tenant's bucket on its current shard for records of the
// tenant: a new override or spread would hide them.
func tenantHasNoRecords(ctx context.Context, cur *routing.Table, prefix, tenant string, shards map[string]redis.UniversalClient) error {
	b := routing.BucketOf(tenant, cur.Buckets)
	owner := cur.BucketOwner(b)
	c, ok := shards[owner]
	if !ok {
		return fmt.Errorf("refused: cannot check that tenant %q has no records in bucket %d on shard %s; "+
			"pass --shard %s=host:port (or --cache for a pure cache). A tenant with records moves with 'celebrity migrate start'",
			tenant, b, owner, owner)
	}
	keys := routingfmt.Keys(routing.Keys{Prefix: prefix}.Tag(routing.BucketUnit(b)))
	match := globEscape(routingfmt.RecordField(tenant, "")) + "*"
	fields, _, err := c.HScan(ctx, keys.Records, 0, match, 1000).Result()
	for cursor := uint64(1); err == nil && len(fields) == 0 && cursor != 0; {
		fields, cursor, err = c.HScan(ctx, keys.Records, cursor, match, 1000).Result()
	}
	if err != nil {
		return fmt.Errorf("check tenant %q on shard %s: %w", tenant, owner, err)
	}
	if len(fields) > 0 {
		return fmt.Errorf("refused: tenant %q has records in bucket %d on shard %s; a new placement would hide them. "+
			"Move the tenant with 'celebrity migrate start'", tenant, b, owner)
	}
	return nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

func parseShards(s string) (map[string]redis.UniversalClient, error) {
	out := map[string]redis.UniversalClient{}
	for _, kv := range splitList(s) {
		name, addr, ok := strings.Cut(kv, "=")
		if !ok || name == "" || addr == "" {
			closeAll(valuesOf(out))
			return nil, usagef("--shard wants name=host:port or name=cluster:host:port+host:port..., got %q", kv)
		}
		if seeds, ok := strings.CutPrefix(addr, "cluster:"); ok {
			addrs := strings.Split(seeds, "+")
			if slices.Contains(addrs, "") {
				closeAll(valuesOf(out))
				return nil, usagef("--shard %s: a cluster shard wants cluster:host:port[+host:port...], got %q", name, addr)
			}
			out[name] = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: 1, DialTimeout: 2 * time.Second})
			continue
		}
		out[name] = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1})
	}
	return out, nil
}

// shardAddr returns a shard's address as --shard names it.
func shardAddr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster:" + strings.Join(c.Options().Addrs, "+")
	}
	return "?"
}

func valuesOf[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
