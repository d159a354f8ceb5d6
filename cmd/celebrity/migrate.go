package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// migrateFlags are the flags of every migrate subcommand: the control Redis (--addr or
// --cluster), the shards as the route table names them, and the routing prefix.
type migrateFlags struct {
	connFlags
	prefix, shards, id, target, tenant string
	bucket, sub                        int
	detach, carve, fold, split, merge  bool
	lease, interval                    time.Duration
	batch                              int
}

func (mf *migrateFlags) flagSet(e *env, sub string) *flag.FlagSet {
	fs := newFlagSet(e, "migrate "+sub, &mf.connFlags)
	fs.StringVar(&mf.prefix, "prefix", routing.DefaultPrefix, "routing key `prefix`")
	fs.StringVar(&mf.shards, "shard", "", "shard `addresses` as name=host:port or name=cluster:host:port+...,... (every shard the table names)")
	fs.StringVar(&mf.id, "id", "", "migration `ID` (start: default a fresh one)")
	fs.StringVar(&mf.target, "target", "", "target `shard` (start)")
	fs.IntVar(&mf.bucket, "bucket", -1, "the `bucket` to move (start)")
	fs.StringVar(&mf.tenant, "tenant", "", "the overridden or spread `tenant` to move (start)")
	fs.IntVar(&mf.sub, "sub", -1, "the `sub-bucket` of a spread tenant (start, with --tenant)")
	fs.BoolVar(&mf.carve, "carve", false, "start, with --tenant: carve the tenant out of its shared bucket into an override of its own on --target")
	fs.BoolVar(&mf.fold, "fold", false, "start, with --tenant: fold the tenant's override back into its shared bucket (--target, if given, must be the bucket's shard)")
	fs.BoolVar(&mf.split, "split", false, "start, with --tenant: split the overridden (or spread) tenant into a spread over --target, one shard per sub-bucket, comma-separated (a,b,c,d: four sub-buckets)")
	fs.BoolVar(&mf.merge, "merge", false, "start, with --tenant: merge the spread tenant back into one override unit on --target (one shard)")
	fs.BoolVar(&mf.detach, "detach", false, "start: record the migration and exit; drive it later with 'migrate resume'")
	fs.DurationVar(&mf.lease, "lease", migrate.DefaultLeaseTTL, "driver lease: a driver silent this long is taken over by 'resume'")
	fs.DurationVar(&mf.interval, "interval", 500*time.Millisecond, "refresh `interval` of the progress display")
	fs.IntVar(&mf.batch, "batch", migrate.DefaultBatchSize, "items per copy round trip")
	return fs
}

func runMigrate(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("migrate: give a subcommand: start | status | watch | resume | cancel | list")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "start", "status", "watch", "resume", "cancel", "list":
	default:
		return usagef("migrate: unknown subcommand %q (start | status | watch | resume | cancel | list)", sub)
	}
	var mf migrateFlags
	fs := mf.flagSet(e, sub)
	if err := parse(fs, args); err != nil {
		return err
	}
	if pos := fs.Args(); len(pos) == 1 && mf.id == "" {
		mf.id = pos[0]
	} else if len(pos) > 0 {
		return usagef("migrate %s: unexpected arguments %q", sub, pos)
	}
	if sub != "start" && sub != "list" && mf.id == "" {
		return usagef("migrate %s needs a migration ID", sub)
	}
	spec, err := mf.spec(sub)
	if err != nil {
		return err
	}
	shards, err := parseShards(mf.shards)
	if err != nil {
		return err
	}
	defer closeAll(valuesOf(shards))
	if len(shards) == 0 {
		return usagef("migrate needs --shard name=host:port,... for the shards the route table names")
	}
	c, err := mf.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sc := make(map[string]migrate.ShardClient, len(shards))
	for name, s := range shards {
		sc[name] = s
	}
	co, err := migrate.New(c, migrate.Options{Shards: sc, Prefix: mf.prefix, LeaseTTL: mf.lease, BatchSize: mf.batch})
	if err != nil {
		return usagef("%v", err)
	}
	m := &migrator{e: e, mf: &mf, co: co, shards: shards}
	switch sub {
	case "start":
		return m.start(spec)
	case "status":
		st, err := co.Status(e.ctx, mf.id)
		if err != nil {
			return err
		}
		return m.print(st, m.frame(st))
	case "watch":
		return m.watch()
	case "resume":
		return m.drive(func(ctx context.Context) (migrate.Status, error) { return co.Resume(ctx, mf.id) })
	case "cancel":
		st, err := co.Cancel(e.ctx, mf.id)
		if err != nil {
			return err
		}
		return m.print(st, fmt.Sprintf("%s: %s (%s)\n", st.ID, st.State, st.Reason))
	default:
		sts, err := co.Unfinished(e.ctx)
		if err != nil {
			return err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d unfinished migration(s)\n", len(sts))
		for _, st := range sts {
			fmt.Fprintf(&b, "  %-18s %-22s %s -> %s  %-10s lease until %s\n", st.ID, st.Unit, st.Source, st.Target, st.State, clock(st.LeaseUntil))
		}
		if sts == nil {
			sts = []migrate.Status{}
		}
		return m.print(sts, b.String())
	}
}

// spec builds the Spec of a start from the flags, refusing an ambiguous unit.
func (mf *migrateFlags) spec(sub string) (migrate.Spec, error) {
	if sub != "start" {
		return migrate.Spec{}, nil
	}
	s := migrate.Spec{ID: mf.id, Target: mf.target}
	switch {
	case mf.carve && mf.fold, mf.split && (mf.carve || mf.fold), mf.merge && (mf.carve || mf.fold || mf.split):
		return s, usagef("give one of --carve, --fold, --split and --merge")
	case mf.merge && (mf.tenant == "" || mf.sub >= 0 || mf.bucket >= 0 || mf.target == "" || strings.Contains(mf.target, ",")):
		return s, usagef("--merge needs --tenant and one --target shard (no --sub or --bucket)")
	case mf.merge:
		s.Unit = routing.TenantUnit(mf.tenant)
	case mf.split && (mf.tenant == "" || mf.sub >= 0 || mf.bucket >= 0 || mf.target == ""):
		return s, usagef("--split needs --tenant and --target a,b,... (one shard per sub-bucket; no --sub or --bucket)")
	case mf.split:
		s.Unit = routing.TenantUnit(mf.tenant)
	case mf.fold && (mf.tenant == "" || mf.sub >= 0 || mf.bucket >= 0):
		return s, usagef("--fold needs --tenant (and no --sub or --bucket): the tenant returns to its shared bucket")
	case mf.fold:
		s.Unit = routing.TenantUnit(mf.tenant)
	case mf.target == "":
		return s, usagef("migrate start needs --target")
	case mf.bucket >= 0 && mf.tenant != "":
		return s, usagef("give --bucket or --tenant, not both")
	case mf.carve && (mf.tenant == "" || mf.sub >= 0):
		return s, usagef("--carve needs --tenant (and no --sub): the tenant leaves its shared bucket")
	case mf.carve:
		s.Unit = routing.TenantUnit(mf.tenant)
	case mf.bucket >= 0:
		s.Unit = routing.BucketUnit(uint32(mf.bucket))
	case mf.tenant != "" && mf.sub >= 0:
		s.Unit = routing.SpreadUnit(mf.tenant, uint32(mf.sub))
	case mf.tenant != "":
		s.Unit = routing.TenantUnit(mf.tenant)
	default:
		return s, usagef("migrate start needs --bucket N or --tenant NAME [--sub I]")
	}
	if err := s.Unit.Validate(); err != nil {
		return s, usagef("%v", err)
	}
	return s, nil
}

type migrator struct {
	e      *env
	mf     *migrateFlags
	co     *migrate.Coordinator
	shards map[string]redis.UniversalClient
}

func (m *migrator) print(v any, text string) error {
	if m.mf.json {
		return printJSON(m.e.stdout, v)
	}
	_, err := fmt.Fprint(m.e.stdout, text)
	return err
}

func (m *migrator) start(spec migrate.Spec) error {
	var st migrate.Status
	var err error
	switch {
	case m.mf.carve:
		st, err = m.co.StartCarve(m.e.ctx, migrate.CarveSpec{ID: spec.ID, Tenant: spec.Unit.Tenant, Target: spec.Target})
	case m.mf.fold:
		st, err = m.co.StartFold(m.e.ctx, migrate.FoldSpec{ID: spec.ID, Tenant: spec.Unit.Tenant, Target: spec.Target})
	case m.mf.split:
		st, err = m.co.StartSplit(m.e.ctx, migrate.SplitSpec{ID: spec.ID, Tenant: spec.Unit.Tenant,
			Targets: strings.Split(spec.Target, ",")})
	case m.mf.merge:
		st, err = m.co.StartMerge(m.e.ctx, migrate.MergeSpec{ID: spec.ID, Tenant: spec.Unit.Tenant, Target: spec.Target})
	default:
		st, err = m.co.Start(m.e.ctx, spec)
	}
	if err != nil {
		return err
	}
	if m.mf.detach {
		return m.print(st, fmt.Sprintf("started %s: %s %s -> %s; drive it with 'celebrity migrate resume %s'\n",
			st.ID, st.Unit, st.Source, st.Target, st.ID))
	}
	m.mf.id = st.ID
	return m.drive(func(ctx context.Context) (migrate.Status, error) { return m.co.Resume(ctx, st.ID) })
}

// drive runs a driving call (Start's or Resume's) while showing its progress, then prints
// the final status. The process is the migration's driver until the call returns; if it
// dies, 'migrate resume' takes over once its lease ends.
func (m *migrator) drive(call func(context.Context) (migrate.Status, error)) error {
	done := make(chan struct{})
	var st migrate.Status
	var err error
	go func() {
		defer close(done)
		st, err = call(m.e.ctx)
	}()
	if !m.mf.json {
		m.follow(done)
	}
	<-done
	if err != nil {
		return err
	}
	return m.print(st, m.frame(st))
}

// watch shows a migration's progress until it reaches a final state.
func (m *migrator) watch() error {
	for {
		st, err := m.co.Status(m.e.ctx, m.mf.id)
		if err != nil {
			return err
		}
		if m.mf.json {
			if err := printJSON(m.e.stdout, st); err != nil {
				return err
			}
		} else {
			fmt.Fprint(m.e.stdout, "\x1b[H\x1b[2J"+m.frame(st))
		}
		if st.State.Terminal() {
			return nil
		}
		select {
		case <-m.e.ctx.Done():
			return m.e.ctx.Err()
		case <-time.After(m.mf.interval):
		}
	}
}

// follow redraws the frame of the migration being driven until done is closed.
func (m *migrator) follow(done <-chan struct{}) {
	t := time.NewTicker(m.mf.interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if st, err := m.co.Status(m.e.ctx, m.mf.id); err == nil {
				fmt.Fprint(m.e.stderr, "\x1b[H\x1b[2J"+m.frame(st))
			}
		}
	}
}

// frame draws the migration's state, the copy's progress against the unit's size on the
// source, its rate and ETA, and the write pause once it flipped.
func (m *migrator) frame(st migrate.Status) string {
	total := m.unitSize(st)
	return renderMigration(st, total, time.Now())
}

// unitSize is the number of items the snapshot copies: records and op records of the unit
// on the source (0 when unknown).
func (m *migrator) unitSize(st migrate.Status) int64 {
	c, ok := m.shards[st.Source]
	if !ok {
		return 0
	}
	keys := routingfmt.Keys(routing.Keys{Prefix: m.mf.prefix}.Tag(st.Unit))
	ctx, cancel := context.WithTimeout(m.e.ctx, time.Second)
	defer cancel()
	n1, err1 := c.HLen(ctx, keys.Records).Result()
	n2, err2 := c.HLen(ctx, keys.Ops).Result()
	if err1 != nil || err2 != nil {
		return 0
	}
	return n1 + n2
}

var migrationSteps = []migrate.State{migrate.OwnedA, migrate.Copying, migrate.CatchingUp, migrate.ClosedA, migrate.ReadyB, migrate.OwnedB}

func renderMigration(st migrate.Status, total int64, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "migration %s: %s %s -> %s\n", st.ID, st.Unit, st.Source, st.Target)
	var steps []string
	for _, s := range migrationSteps {
		mark := string(s)
		if s == st.State {
			mark = "[" + mark + "]"
		}
		steps = append(steps, mark)
	}
	fmt.Fprintf(&b, "state: %s\n", strings.Join(steps, " -> "))
	if st.State == migrate.Cancelling || st.State == migrate.Cancelled || st.State == migrate.Aborted {
		fmt.Fprintf(&b, "       %s: %s\n", st.State, st.Reason)
	}
	frac := 0.0
	switch {
	case st.State == migrate.OwnedA:
	case st.State == migrate.Copying && total > 0:
		frac = min(float64(st.Copied)/float64(total), 1)
	case st.State != migrate.Copying:
		frac = 1
	}
	if st.State == migrate.Cancelled || st.State == migrate.Aborted {
		frac = 0
	}
	const width = 30
	fill := int(frac*width + 0.5)
	fmt.Fprintf(&b, "copy:  [%s%s] %3.0f%%  %d item(s) copied", strings.Repeat("#", fill), strings.Repeat("-", width-fill), frac*100, st.Copied)
	if total > 0 && st.State == migrate.Copying {
		fmt.Fprintf(&b, " of %d", total)
	}
	b.WriteString("\n")
	if el := now.Sub(st.Created).Seconds(); st.Copied > 0 && el > 0 && st.State == migrate.Copying {
		rate := float64(st.Copied) / el
		eta := "unknown"
		if total > st.Copied && rate > 0 {
			eta = (time.Duration(float64(total-st.Copied) / rate * float64(time.Second))).Round(time.Second).String()
		}
		fmt.Fprintf(&b, "rate:  %.0f items/s, ETA %s\n", rate, eta)
	}
	fmt.Fprintf(&b, "log:   %d change(s) applied\n", st.LogApplied)
	if st.State == migrate.OwnedB {
		fmt.Fprintf(&b, "pause: %v (barrier to flip)\n", st.Pause)
	}
	if !st.LeaseUntil.IsZero() && !st.State.Terminal() {
		fmt.Fprintf(&b, "driver: epoch %d, lease until %s\n", st.Epoch, clock(st.LeaseUntil))
	}
	return b.String()
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}
