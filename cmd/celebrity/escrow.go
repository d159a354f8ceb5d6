package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/escrow"
)

// escrowFlags describe the pool a command looks at: the same name, capacity and owner ranges
// the service's PoolOptions use, so the command sees the ledgers the service writes.
type escrowFlags struct {
	connFlags
	pool, owners, prefix, witness, owner string
	capacity                             int
	leaseSkew                            time.Duration
	yes                                  bool
	// previous opens the same pool under escrow.PreviousDefaultPrefix, for a hint when the
	// pool is not found under the default prefix.
	previous func() (*escrow.Pool, error)
}

func (ef *escrowFlags) flagSet(e *env, sub string) *flag.FlagSet {
	fs := newFlagSet(e, "escrow "+sub, &ef.connFlags)
	fs.StringVar(&ef.pool, "pool", "", "pool `name` (PoolOptions.Name)")
	fs.IntVar(&ef.capacity, "capacity", 0, "pool capacity (PoolOptions.Capacity)")
	fs.StringVar(&ef.owners, "owners", "", "owner `ranges` as name=first-last,... (PoolOptions.Owners)")
	fs.StringVar(&ef.prefix, "prefix", "", "key prefix (PoolOptions.Prefix; default the library's)")
	fs.StringVar(&ef.witness, "witness", "", "witness Redis `host:port` when the service uses a separate one (PoolOptions.Witness)")
	fs.StringVar(&ef.owner, "owner", "", "one `owner` (holders: all owners when empty; reconcile: required)")
	fs.DurationVar(&ef.leaseSkew, "lease-skew", 0, "the pool's lease skew margin (PoolOptions.LeaseSkew; default the library's): holders marks a lease that ended more than this ago as lapsed")
	fs.BoolVar(&ef.yes, "yes", false, "reconcile without asking for confirmation")
	return fs
}

func runEscrow(e *env, args []string) error {
	if len(args) == 0 {
		return usagef("escrow: give a subcommand: audit | holders | recover | reconcile")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "audit", "holders", "recover", "reconcile":
	default:
		return usagef("escrow: unknown subcommand %q (audit | holders | recover | reconcile)", sub)
	}
	var ef escrowFlags
	if err := parse(ef.flagSet(e, sub), args); err != nil {
		return err
	}
	opts, err := ef.poolOptions()
	if err != nil {
		return err
	}
	if sub == "reconcile" && ef.owner == "" {
		return usagef("escrow reconcile needs --owner: the ledger to bring back into service")
	}
	c, err := ef.client(e.ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if ef.witness != "" {
		w := redis.NewClient(&redis.Options{Addr: ef.witness, MaxRetries: 1})
		defer w.Close()
		opts.Witness = w
	}
	pool, err := escrow.NewPool(c, opts)
	if err != nil {
		return usagef("%v", err)
	}
	ef.previous = func() (*escrow.Pool, error) {
		o := opts
		o.Prefix = escrow.PreviousDefaultPrefix
		return escrow.NewPool(c, o)
	}
	switch sub {
	case "audit":
		return ef.audit(e, pool)
	case "holders":
		return ef.holders(e, pool)
	case "recover":
		if err := ef.notOnlyUnderPrevious(e, pool); err != nil {
			return err
		}
		rep, err := pool.Recover(e.ctx)
		if err != nil {
			return err
		}
		return ef.print(e, rep, fmt.Sprintf("completed %d, aborted %d, still pending %d\n", len(rep.Completed), len(rep.Aborted), len(rep.Pending)))
	default:
		if !ef.yes && !confirm(e, fmt.Sprintf("reconcile owner %q of pool %q? Permits acknowledged by the lost state may be granted again", ef.owner, ef.pool)) {
			return usagef("not reconciled (answer 'yes', or pass --yes)")
		}
		if err := pool.Reconcile(e.ctx, ef.owner); err != nil {
			return err
		}
		return ef.print(e, map[string]string{"reconciled": ef.owner}, fmt.Sprintf("reconciled %q\n", ef.owner))
	}
}

func (ef *escrowFlags) poolOptions() (escrow.PoolOptions, error) {
	o := escrow.PoolOptions{Name: ef.pool, Capacity: ef.capacity, Prefix: ef.prefix, LeaseSkew: ef.leaseSkew,
		// The tool reads and repairs what the service set up; Init's durability checks are
		// the service's, not the operator's.
		AllowWeakDurability: true, AllowSharedWitness: true}
	if ef.pool == "" || ef.capacity <= 0 || ef.owners == "" {
		return o, usagef("escrow needs --pool, --capacity and --owners as the service configures them")
	}
	for _, spec := range splitList(ef.owners) {
		name, rng, ok1 := strings.Cut(spec, "=")
		first, last, ok2 := strings.Cut(rng, "-")
		f, err1 := strconv.Atoi(first)
		l, err2 := strconv.Atoi(last)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			return o, usagef("--owners wants name=first-last, got %q", spec)
		}
		o.Owners = append(o.Owners, escrow.Owner{Name: name, First: f, Last: l})
	}
	return o, nil
}

func (ef *escrowFlags) print(e *env, v any, text string) error {
	if ef.json {
		return printJSON(e.stdout, v)
	}
	_, err := fmt.Fprint(e.stdout, text)
	return err
}

func (ef *escrowFlags) audit(e *env, pool *escrow.Pool) error {
	rep, err := pool.Audit(e.ctx)
	if err != nil {
		return err
	}
	if err := ef.onlyUnderPrevious(e, rep); err != nil {
		return err
	}
	if err := ef.print(e, rep, rep.String()+"\n"); err != nil {
		return err
	}
	if !rep.Clean() {
		return errors.New("the audit found problems (see the report)")
	}
	return nil
}

func (ef *escrowFlags) holders(e *env, pool *escrow.Pool) error {
	ledgers, err := ef.ledgersFound(e, pool)
	if err != nil {
		return err
	}
	owners := pool.Owners()
	if ef.owner != "" {
		owners = []string{ef.owner}
	}
	all := map[string][]escrow.Holder{}
	var b strings.Builder
	var lost []string
	for _, o := range owners {
		if found, known := ledgers[o]; known && !found {
			lost = append(lost, o)
			fmt.Fprintf(&b, "%s: no ledger (lost, or never initialized: see escrow audit)\n", o)
			continue
		}
		hs, err := pool.Holders(e.ctx, o)
		if err != nil {
			return err
		}
		all[o] = hs
		lapsed := 0
		for _, h := range hs {
			if h.Lapsed {
				lapsed++
			}
		}
		fmt.Fprintf(&b, "%s: %d holder(s), %d lapsed\n", o, len(hs), lapsed)
		for _, h := range hs {
			fmt.Fprintf(&b, "  permit %-6d token %-8d %-48s job %q\n", h.Permit, h.Token, leaseState(h), h.Job)
		}
	}
	if err := ef.print(e, all, b.String()); err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("no ledger for owner(s) %s of pool %q", strings.Join(lost, ", "), ef.pool)
	}
	return nil
}

// ledgersFound reads, with Pool.Audit, which owners of the pool have a ledger, and refuses a
// pool none of whose owners has one: the pool does not exist under these flags (a
// mistyped --pool or --prefix), and listing its holders would print zeros.
func (ef *escrowFlags) ledgersFound(e *env, pool *escrow.Pool) (map[string]bool, error) {
	rep, err := pool.Audit(e.ctx)
	if err != nil {
		return nil, err
	}
	found := make(map[string]bool, len(rep.Owners))
	anyFound := false
	for _, o := range rep.Owners {
		found[o.Owner] = o.Exists
		anyFound = anyFound || o.Exists
	}
	if !anyFound {
		if err := ef.onlyUnderPrevious(e, rep); err != nil {
			return nil, err
		}
		prefix := ef.prefix
		if prefix == "" {
			prefix = escrow.DefaultPrefix
		}
		return nil, usagef("pool %q does not exist under prefix %q: no owner has a ledger (check --pool and --prefix)", ef.pool, prefix)
	}
	return found, nil
}

// notOnlyUnderPrevious is onlyUnderPrevious for a command that does not audit the pool
// itself: under the default prefix it audits it first (a pool found only under the previous
// default would otherwise look recovered, with nothing to do).
func (ef *escrowFlags) notOnlyUnderPrevious(e *env, pool *escrow.Pool) error {
	if ef.prefix != "" && ef.prefix != escrow.DefaultPrefix {
		return nil
	}
	rep, err := pool.Audit(e.ctx)
	if err != nil {
		return err
	}
	return ef.onlyUnderPrevious(e, rep)
}

// onlyUnderPrevious returns a usage error naming escrow.PreviousDefaultPrefix when the pool,
// read under the default prefix in rep, has no ledger there but has one under the previous
// default: the operator forgot --prefix, and the report would show every permit missing.
func (ef *escrowFlags) onlyUnderPrevious(e *env, rep escrow.AuditReport) error {
	if ef.prefix != "" && ef.prefix != escrow.DefaultPrefix {
		return nil
	}
	for _, o := range rep.Owners {
		if o.Exists {
			return nil
		}
	}
	if !ef.foundUnderPrevious(e) {
		return nil
	}
	return usagef("pool %q does not exist under prefix %q, the default since v0.2.0; it exists under %q, the default before: give --prefix %s",
		ef.pool, escrow.DefaultPrefix, escrow.PreviousDefaultPrefix, escrow.PreviousDefaultPrefix)
}

// foundUnderPrevious reports whether some owner of the pool has a ledger under
// escrow.PreviousDefaultPrefix (false if that cannot be read).
func (ef *escrowFlags) foundUnderPrevious(e *env) bool {
	pool, err := ef.previous()
	if err != nil {
		return false
	}
	rep, err := pool.Audit(e.ctx)
	if err != nil {
		return false
	}
	for _, o := range rep.Owners {
		if o.Exists {
			return true
		}
	}
	return false
}

// leaseState describes a holder's lease: its end by the ledger server's clock, and whether it
// had ended (expired) or ended more than the skew margin ago (lapsed: the permit is no longer
// the job's and the next take-back at its owner frees it) when the ledger was read.
func leaseState(h escrow.Holder) string {
	switch {
	case h.Expires.IsZero():
		return "no lease"
	case h.Lapsed:
		return "lease ended " + h.Expires.UTC().Format("15:04:05.000") + " LAPSED (taken back next)"
	case h.Expired:
		return "lease ended " + h.Expires.UTC().Format("15:04:05.000") + " expired (in skew margin)"
	}
	return "lease until " + h.Expires.UTC().Format("15:04:05.000")
}
