package escrow

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/celebrity-go/celebrity/internal/script"
)

// Pool is a partitioned (escrow) limiter: permits 1..Capacity are split among owners, each
// owner's ledger lives in its own hash slot, and each owner grants only its own permits, with
// no coordination per acquire. Free permits move between owners only through the transfer
// protocol (Transfer, Recover), which never lets a permit exist at two owners.
//
// Every ledger keeps a log of its steps, which a witness chain outside the ledger's slot
// (PoolOptions.Witness) confirms before any step is acknowledged. A ledger whose history is not
// the confirmed one refuses with ErrFenced until Reconcile.
//
// A Pool is safe for concurrent use; it starts no goroutines.
type Pool struct {
	c       Client
	w       Client
	opts    PoolOptions
	ledgers map[string]ledger
	order   []string
	witness map[string]string
	prev    previous
	stats   counters
}

// NewPool validates the options and returns a pool. It does no I/O; call Init once at
// start-up.
func NewPool(client Client, opts PoolOptions) (*Pool, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client must not be nil", ErrInvalid)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if readsReplicas(client) {
		return nil, errors.New("escrow: client reads from replicas (ClusterOptions.ReadOnly, RouteByLatency or RouteRandomly); a Pool must read witnesses and ledgers on masters")
	}
	if readsReplicas(opts.Witness) {
		return nil, errors.New("escrow: PoolOptions.Witness reads from replicas (ClusterOptions.ReadOnly, RouteByLatency or RouteRandomly); witnesses must be read on masters")
	}
	p := &Pool{c: client, w: opts.Witness, opts: opts, ledgers: map[string]ledger{}, witness: map[string]string{}}
	if p.w == nil {
		p.w = client
	}
	for _, o := range opts.Owners {
		tag := opts.Name + ":" + o.Name
		l := newLedger(opts.Prefix, tag, o.Name, o.First, o.Last, opts.Capacity)
		p.ledgers[o.Name] = l
		p.order = append(p.order, o.Name)
		p.witness[o.Name] = witnessKey(opts.Prefix, tag, l.meta())
		if opts.Prefix == DefaultPrefix {
			p.prev.add(tag, func(meta string) string { return witnessKey(PreviousDefaultPrefix, tag, meta) })
		}
	}
	p.prev.name = opts.Name
	return p, nil
}

// readsReplicas reports whether c is a cluster client that sends read-only commands (ZRANGE,
// EVALSHA_RO) to replicas. A lagging replica would show an old witness, and a ledger behind
// its witness would pass the fence.
func readsReplicas(c Client) bool {
	cc, ok := c.(*redis.ClusterClient)
	return ok && cc.Options().ReadOnly
}

// Owners returns the owner names in the order of the options.
func (p *Pool) Owners() []string { return append([]string(nil), p.order...) }

// WitnessKey returns the key that holds the witness of owner's ledger (on PoolOptions.Witness).
func (p *Pool) WitnessKey(owner string) string { return p.witness[owner] }

// Init checks the durability settings of the ledger and witness clients (see the package
// doc), creates every ledger that does not exist and has never been witnessed, and has the
// witness confirm every ledger's history. A ledger that the witness shows once existed is
// not re-created (that would resurrect permits): Init initialises the others and returns
// ErrLedgerMissing naming it, and operations on it return ErrLedgerMissing until Reconcile.
// Likewise a ledger found behind its witness is fenced and reported (ErrFenced) while the
// others are initialised. Init is idempotent and safe to run from every process. Under the
// default prefix, Init creates no ledger for a pool that exists under PreviousDefaultPrefix:
// ErrPreviousPrefix, before it writes anything.
func (p *Pool) Init(ctx context.Context) error {
	if err := checkDurability(ctx, p.c, p.opts.Logger, p.opts.AllowEviction, p.opts.AllowWeakDurability); err != nil {
		return err
	}
	if p.opts.Witness != nil {
		// An evicted witness reads as empty and silently weakens fencing.
		if err := checkDurability(ctx, p.opts.Witness, p.opts.Logger, p.opts.AllowEviction, p.opts.AllowWeakDurability); err != nil {
			return fmt.Errorf("escrow: witness: %w", err)
		}
	}
	if err := p.checkPlacement(ctx); err != nil {
		return err
	}
	var lost []error
	checked := false
	for _, name := range p.order {
		w, err := p.readWitness(ctx, name)
		if err != nil {
			return err
		}
		if w == 0 && !checked { // a ledger Init may create: none may exist under the old default
			checked = true
			if err := p.prev.check(ctx, p.c, p.w); err != nil {
				return err
			}
		}
		l := p.ledgers[name]
		_, seg, err := l.init(ctx, p.c, w)
		if errors.Is(err, ErrLedgerMissing) {
			lost = append(lost, err)
			continue
		}
		if err != nil {
			return err
		}
		if err := p.confirm(ctx, name, seg); err != nil {
			lost = append(lost, err)
		}
	}
	return errors.Join(lost...)
}

func (p *Pool) ledger(owner string) (ledger, error) {
	l, ok := p.ledgers[owner]
	if !ok {
		return ledger{}, fmt.Errorf("%w: %q", ErrUnknownOwner, errs.Short(owner))
	}
	return l, nil
}

// Acquire grants one of owner's free permits to jobID, or returns ErrExhausted when owner has
// none free (free permits at other owners do not help until a transfer moves them). It is
// idempotent per job ID: a retry returns the same permit and token, with Replayed set and
// Expires counted from the lease the ledger has left. A retry that comes more than LeaseSkew
// after the job's lease ended is a new grant (the old one was taken back), with a new token.
//
// Acquire reads owner's witness first and passes it to the script, which refuses (ErrFenced)
// if the ledger is already behind; after the grant the witness must confirm the ledger's
// history through the grant (see "Fencing against old state" in the package doc), so no
// grant of a ledger restored to an earlier point is ever acknowledged: the ledger is fenced
// instead. Cost: three round trips (five when concurrent confirmations arrive out of order).
// After an error other than ErrExhausted the job may or may not hold a permit: retry with
// the same job ID (it returns the same permit), or Release.
func (p *Pool) Acquire(ctx context.Context, owner, jobID string) (Grant, error) {
	l, err := p.ledger(owner)
	if err != nil {
		return Grant{}, err
	}
	if err := checkID("job ID", jobID); err != nil {
		return Grant{}, err
	}
	w, err := p.readWitness(ctx, owner)
	if err != nil {
		return Grant{}, err
	}
	g, seg, err := l.acquire(ctx, p.c, &p.stats, p.opts.Clock, jobID, w, p.opts.Lease, p.opts.LeaseSkew, true)
	if err == nil {
		err = p.confirm(ctx, owner, seg)
	}
	if err != nil {
		g = Grant{}
	}
	count(&p.stats, g, err)
	p.logFenced(err)
	return g, p.prev.explain(ctx, err, p.c, p.w)
}

// Release frees the permit that jobID holds at owner, and returns nil. It is idempotent per
// job ID: a replay of a release (go-redis's own after a lost reply, or the caller's retry)
// changes nothing and returns nil again, since each ledger remembers the last 1024 job IDs it
// released. Releasing a job that holds nothing at owner otherwise (taken back after its
// lease, granted by another owner, never granted, or released before those 1024) changes
// nothing and returns ErrNotHeld. No release can add capacity. A fenced ledger refuses with
// ErrFenced (the witness is not read: a release never creates
// capacity).
func (p *Pool) Release(ctx context.Context, owner, jobID string) error {
	l, err := p.ledger(owner)
	if err != nil {
		return err
	}
	freed, err := l.release(ctx, p.c, jobID)
	countRelease(&p.stats, freed, err)
	return err
}

// Renew extends the lease of jobID's grant at owner by PoolOptions.Lease from now and returns
// the new expiry by the caller's clock. A job that holds nothing there (its lease ended and
// the permit was taken back, or it was released) gets ErrNotHeld and must stop working on
// the permit; so does a job whose lease ended more than LeaseSkew ago by the ledger server's
// clock, whose permit Renew takes back (it may already be another job's: a restored ledger
// can have forgotten that grant). The renewal is acknowledged only after the witness confirmed the ledger's
// history right after it (see "Fencing against old state"): a ledger restored to a point
// where the job still held a permit that has since been granted again is fenced (ErrFenced)
// instead. Cost: two round trips (three when confirmations arrive out of order).
func (p *Pool) Renew(ctx context.Context, owner, jobID string) (time.Time, error) {
	l, err := p.ledger(owner)
	if err != nil {
		return time.Time{}, err
	}
	exp, seg, err := l.renew(ctx, p.c, &p.stats, p.opts.Clock, jobID, p.opts.Lease, p.opts.LeaseSkew)
	if err == nil {
		err = p.confirm(ctx, owner, seg)
	}
	if err != nil {
		p.logFenced(err)
		return time.Time{}, err
	}
	return exp, nil
}

// Sweep takes back, at every owner, the permits of jobs whose lease ended more than LeaseSkew
// ago by the ledger server's clock, and returns how many it freed. Acquire, Renew and Freeze
// take such permits back at their owner as they go; Sweep frees them without waiting for
// one of those, for example before reading free permits (Rebalancer.Step runs it). It writes
// only what the next Acquire would, is not a witnessed step (like Release, it never creates
// capacity), and is safe to run from every process at any time. A fenced or missing ledger
// is skipped and reported in the joined error; the others are swept. Cost: one round trip
// per owner (more with over 1024 lapsed leases at one owner). Without a Lease it finds
// nothing.
func (p *Pool) Sweep(ctx context.Context) (int, error) {
	total := 0
	var errs []error
	for _, name := range p.order {
		n, err := p.ledgers[name].sweep(ctx, p.c, &p.stats, p.opts.LeaseSkew)
		total += n
		if err != nil {
			if ctx.Err() != nil {
				return total, err
			}
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// Holders lists the jobs holding a permit at owner, with their tokens and lease expiries,
// read atomically. A lease that had ended by the server's clock at the read is marked
// Expired, and one that had ended more than LeaseSkew before it Lapsed: its permit is
// counted as held until a take-back (Acquire, Renew, Freeze, Sweep) frees it.
func (p *Pool) Holders(ctx context.Context, owner string) ([]Holder, error) {
	l, err := p.ledger(owner)
	if err != nil {
		return nil, err
	}
	snap, err := l.snapshot(ctx, p.c)
	if err != nil {
		return nil, err
	}
	return snap.holders(p.opts.LeaseSkew), nil
}

// Audit reads every ledger (each atomically, one after the other) and every witness and
// places every permit. On a quiescent pool the report is exact; while transfers run, a
// permit may be seen twice or not at all because ledgers are read at different instants.
func (p *Pool) Audit(ctx context.Context) (AuditReport, error) {
	snaps, wit, err := p.snapshots(ctx)
	if err != nil {
		return AuditReport{}, err
	}
	return buildReport(p.opts.Capacity, snaps, wit, p.opts.LeaseSkew), nil
}

// snapshots reads every witness in one pipeline, then every ledger in another: two round
// trips in all (a cluster pipeline sends each node its part at once).
func (p *Pool) snapshots(ctx context.Context) ([]ledgerSnapshot, map[string]int64, error) {
	wit, err := p.witnessTops(ctx)
	if err != nil {
		return nil, nil, err
	}
	snaps, err := p.ledgerSnapshots(ctx, wit)
	if err != nil {
		return nil, nil, err
	}
	return snaps, wit, nil
}

// witnessTops reads the top of every owner's witness chain in one pipeline.
func (p *Pool) witnessTops(ctx context.Context) (map[string]int64, error) {
	wp := p.w.Pipeline()
	wcmds := make([]*redis.ZSliceCmd, len(p.order))
	for i, name := range p.order {
		wcmds[i] = wp.ZRangeWithScores(ctx, p.witness[name], -1, -1)
	}
	if _, err := bound.Do(ctx, func() ([]redis.Cmder, error) { return wp.Exec(ctx) }); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("escrow: read witnesses: %w", err)
	}
	wit := make(map[string]int64, len(p.order))
	for i, name := range p.order {
		zs, err := wcmds[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("escrow: read witness of %q: %w", name, err)
		}
		if len(zs) > 0 {
			wit[name] = int64(zs[0].Score)
		}
	}
	return wit, nil
}

// ledgerSnapshots reads every ledger atomically, all in one pipeline, and notes on each the
// top of its witness chain from wit.
func (p *Pool) ledgerSnapshots(ctx context.Context, wit map[string]int64) ([]ledgerSnapshot, error) {
	calls := make([]script.Call, len(p.order))
	for i, name := range p.order {
		calls[i] = script.Call{Script: snapshotScript, Keys: p.ledgers[name].keys} // EVALSHA: see ledger.snapshot
	}
	lcmds, err := script.Pipeline(ctx, p.c, calls)
	if err != nil {
		return nil, fmt.Errorf("escrow: read ledgers: %w", err)
	}
	snaps := make([]ledgerSnapshot, 0, len(p.order))
	for i, name := range p.order {
		res, err := lcmds[i].Slice()
		if err != nil {
			return nil, fmt.Errorf("escrow: snapshot %q: %w", name, err)
		}
		s, err := p.ledgers[name].parseSnapshot(res)
		if err != nil {
			return nil, err
		}
		s.witness = wit[name]
		snaps = append(snaps, s)
	}
	return snaps, nil
}

// Stats returns a snapshot of the counters.
func (p *Pool) Stats() Stats { return p.stats.snapshot() }

func (p *Pool) logFenced(err error) {
	var fe *FencedError
	if p.opts.Logger != nil && errors.As(err, &fe) {
		p.opts.Logger.Warn("escrow: ledger fenced", "owner", fe.Owner, "ledger_seq", fe.LedgerSeq, "witness_seq", fe.WitnessSeq)
	}
}
