package escrow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"time"

	"github.com/redis/go-redis/v9"
)

// Central is a strict limiter with one owner of the whole permit set: one ledger in one hash
// slot, and every acquire and release is one script there. It is simple and exact; for a very
// hot limit that one slot is the bottleneck (see Pool).
//
// A Central is safe for concurrent use. It starts no goroutines.
type Central struct {
	c      Client
	w      Client
	opts   CentralOptions
	l      ledger
	marker string
	prev   previous
	stats  counters
}

// NewCentral validates the options and returns a limiter. It does no I/O; call Init once at
// start-up.
func NewCentral(client Client, opts CentralOptions) (*Central, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: client must not be nil", ErrInvalid)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := newLedger(opts.Prefix, opts.Name, "", 1, opts.Capacity, opts.Capacity)
	c := &Central{c: client, w: opts.Witness, opts: opts, l: l, marker: witnessKey(opts.Prefix, opts.Name, l.meta()) + ":created"}
	if c.w == nil {
		c.w = client
	}
	c.prev.name = opts.Name
	if opts.Prefix == DefaultPrefix {
		c.prev.add(opts.Name, func(meta string) string { return witnessKey(PreviousDefaultPrefix, opts.Name, meta) + ":created" })
	}
	return c, nil
}

// Init checks the durability settings (see the package doc) and creates the ledger with
// permits 1..Capacity if it does not exist and its witness marker does not show that it
// existed before. A lost ledger (FLUSHALL, eviction, a wrong restore) is not re-created with
// every permit free while its old holders may still run: Init returns ErrLedgerMissing until
// an operator calls RestoreLost. A ledger Init creates is pending (Acquire gets ErrFenced)
// until the marker names its creation; one created after the marker already named another
// (an Init that read the marker before that ledger existed, resuming after it was lost) stays
// pending, and Init returns ErrLedgerMissing. Init is idempotent and safe to run from every
// process. A ledger created earlier with another capacity is reported as ErrLayoutMismatch.
// Under the default prefix, Init creates no ledger for a limit that exists under
// PreviousDefaultPrefix: ErrPreviousPrefix.
func (c *Central) Init(ctx context.Context) error {
	if err := checkDurability(ctx, c.c, c.opts.Logger, c.opts.AllowEviction, c.opts.AllowWeakDurability); err != nil {
		return err
	}
	if c.opts.Witness != nil {
		if err := checkDurability(ctx, c.opts.Witness, c.opts.Logger, c.opts.AllowEviction, c.opts.AllowWeakDurability); err != nil {
			return fmt.Errorf("escrow: witness: %w", err)
		}
	}
	existed, err := bound.Do(ctx, func() (string, error) { return c.w.Get(ctx, c.marker).Result() })
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("escrow: read the ledger's marker: %w", noPermUnderDefault(err, c.opts.Prefix))
	}
	wit := int64(0)
	if existed != "" {
		wit = 1
	} else if err := c.prev.check(ctx, c.c, c.w); err != nil {
		return err
	}
	// A ledger this call creates is pending (it grants nothing) until the marker names its
	// creation: the marker read above may be older than a ledger another process created,
	// used and lost in the meantime, and then this creation must not become live.
	_, _, cid, pending, err := c.l.initCID(ctx, c.c, wit, 1, newCreationID())
	if err != nil {
		return err
	}
	return c.activate(ctx, cid, pending, "claim")
}

// activate has the marker name the ledger's creation cid (mode 'claim': only if the marker
// is absent; 'force': RestoreLost) and then activates a pending ledger whose creation the
// marker names. A pending ledger whose creation the marker does not name re-created a lost
// ledger: ErrLedgerMissing.
func (c *Central) activate(ctx context.Context, cid string, pending bool, mode string) error {
	if cid == "" {
		cid = "1" // a ledger created before creation IDs: the marker only records that it existed
	}
	r, err := runScript(ctx, c.w, markScript, []string{c.marker}, mode, cid)
	if err != nil {
		return fmt.Errorf("escrow: write the ledger's marker: %w", err)
	}
	if !pending {
		return nil
	}
	if r.str(0) != cid {
		return fmt.Errorf("%w (limit %q: the ledger was re-created after an earlier one was lost; an operator must call RestoreLost)", ErrLedgerMissing, c.opts.Name)
	}
	a, err := runScript(ctx, c.c, activateScript, c.l.keys, "activate", cid)
	if err != nil {
		return fmt.Errorf("escrow: activate the ledger: %w", err)
	}
	switch a.status {
	case "ok":
		return nil
	case "other", "missing":
		return fmt.Errorf("%w (limit %q: the ledger was lost or re-created during Init; an operator must call RestoreLost)", ErrLedgerMissing, c.opts.Name)
	}
	return fmt.Errorf("escrow: activate the ledger: unexpected reply %q", a.status)
}

// newCreationID returns a random ID for one creation of a Central's ledger.
func newCreationID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// RestoreLost re-creates a ledger that Init reports lost (ErrLedgerMissing) with every permit
// free. Call it only after confirming that no job that held a permit of the lost ledger still
// runs: the package cannot know who held what. Its fencing tokens start at the server's clock
// in microseconds, above any token the lost ledger can have granted (one per grant, from 1),
// so a downstream that checks tokens still refuses an old holder. The call is logged to
// Logger and counted in Stats.Restored. It returns ErrConflict when the ledger exists, and,
// under DefaultPrefix, ErrPreviousPrefix when the limit exists under PreviousDefaultPrefix
// (its ledger is not lost: the process has the wrong prefix), before it writes anything.
func (c *Central) RestoreLost(ctx context.Context) error {
	if err := c.prev.check(ctx, c.c, c.w); err != nil {
		return err
	}
	now, err := bound.Do(ctx, func() (time.Time, error) { return c.w.Time(ctx).Result() })
	if err != nil {
		return fmt.Errorf("escrow: read the server clock: %w", err)
	}
	// A pending ledger (re-created by an Init that read the marker before the lost ledger
	// existed) has granted nothing; it is replaced.
	if _, err := runScript(ctx, c.c, activateScript, c.l.keys, "drop", ""); err != nil {
		return fmt.Errorf("escrow: drop a pending ledger: %w", err)
	}
	cid := newCreationID()
	created, _, _, _, err := c.l.initCID(ctx, c.c, 0, max(1, now.UnixMicro()), cid)
	if err != nil {
		return err
	}
	if !created {
		return fmt.Errorf("%w: the ledger of %q exists; RestoreLost only re-creates a lost one", ErrConflict, c.opts.Name)
	}
	c.stats.restored.Add(uint64(c.opts.Capacity))
	if c.opts.Logger != nil {
		c.opts.Logger.Warn("escrow: lost ledger re-created by RestoreLost", "limit", c.opts.Name, "permits", c.opts.Capacity)
	}
	return c.activate(ctx, cid, true, "force")
}

// Acquire grants a permit to jobID, or returns ErrExhausted. It is idempotent per job ID: a
// retry (also go-redis's own retry after a lost reply) returns the same permit and token,
// never a second permit, with Expires counted from the lease the ledger has left; a retry
// that comes more than LeaseSkew after the job's lease ended is a new grant with a new token. The job holds the permit until Release. After an error other than
// ErrExhausted the job may or may not hold a permit: retry with the same job ID, or Release.
func (c *Central) Acquire(ctx context.Context, jobID string) (Grant, error) {
	g, _, err := c.l.acquire(ctx, c.c, &c.stats, c.opts.Clock, jobID, 0, c.opts.Lease, c.opts.LeaseSkew, false)
	count(&c.stats, g, err)
	return g, c.prev.explain(ctx, err, c.c, c.w)
}

// Release frees the permit held by jobID, and returns nil. It is idempotent per job ID: a
// replay of a release (go-redis's own after a lost reply, or the caller's retry) changes
// nothing and returns nil again, since the ledger remembers the last 1024 job IDs it
// released. Releasing a job that holds nothing otherwise (taken back after its lease, never
// granted, or released before those 1024) changes nothing and returns ErrNotHeld. No release
// can add capacity.
func (c *Central) Release(ctx context.Context, jobID string) error {
	freed, err := c.l.release(ctx, c.c, jobID)
	countRelease(&c.stats, freed, err)
	return c.prev.explain(ctx, err, c.c, c.w)
}

// Renew extends the lease of jobID's grant by CentralOptions.Lease from now and returns the new
// expiry by the caller's clock. A job that holds nothing (its lease ended and the permit was
// taken back, or it was released) gets ErrNotHeld and must stop working on the permit; so
// does a job whose lease ended more than LeaseSkew ago by the ledger server's clock, whose
// permit Renew takes back.
func (c *Central) Renew(ctx context.Context, jobID string) (time.Time, error) {
	exp, _, err := c.l.renew(ctx, c.c, &c.stats, c.opts.Clock, jobID, c.opts.Lease, c.opts.LeaseSkew)
	return exp, c.prev.explain(ctx, err, c.c, c.w)
}

// Sweep takes back the permits of jobs whose lease ended more than LeaseSkew ago by the
// ledger server's clock, and returns how many it freed; see Pool.Sweep. Cost: one round
// trip (more with over 1024 lapsed leases).
func (c *Central) Sweep(ctx context.Context) (int, error) {
	return c.l.sweep(ctx, c.c, &c.stats, c.opts.LeaseSkew)
}

// Holders lists the jobs holding a permit, with their tokens and lease expiries, read
// atomically, marking expired and lapsed leases as Pool.Holders does.
func (c *Central) Holders(ctx context.Context) ([]Holder, error) {
	snap, err := c.l.snapshot(ctx, c.c)
	if err != nil {
		return nil, err
	}
	return snap.holders(c.opts.LeaseSkew), nil
}

// Audit reads the ledger atomically and checks that every permit 1..Capacity is in exactly
// one place (free, or held by one job).
func (c *Central) Audit(ctx context.Context) (AuditReport, error) {
	snap, err := c.l.snapshot(ctx, c.c)
	if err != nil {
		return AuditReport{}, err
	}
	return buildReport(c.opts.Capacity, []ledgerSnapshot{snap}, nil, c.opts.LeaseSkew), nil
}

// Stats returns a snapshot of the counters.
func (c *Central) Stats() Stats { return c.stats.snapshot() }

func count(s *counters, g Grant, err error) {
	switch {
	case err == nil && g.Replayed:
		s.replayed.Add(1)
	case err == nil:
		s.acquired.Add(1)
	case errors.Is(err, ErrExhausted):
		s.exhausted.Add(1)
	case errors.Is(err, ErrFenced):
		s.fenced.Add(1)
	}
}

func countRelease(s *counters, freed bool, err error) {
	switch {
	case err == nil && freed:
		s.released.Add(1)
	case err == nil, errors.Is(err, ErrNotHeld):
		s.noop.Add(1)
	case errors.Is(err, ErrFenced):
		s.fenced.Add(1)
	}
}
