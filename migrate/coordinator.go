package migrate

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"sync"

	"github.com/celebrity-go/celebrity/routing"
)

// Coordinator drives durable migrations of placement units between shards. Every step is
// journaled in the control Redis before or after it is taken, so that any Coordinator over
// the same control Redis can Resume a migration whose driver died. A Coordinator holds no
// goroutines and is safe for concurrent use; the migrations of different units proceed
// independently.
type Coordinator struct {
	control Control
	store   *routing.Store
	shards  map[string]*shard
	keys    routing.Keys
	o       Options
	stats   stats

	vmu  sync.Mutex
	kept map[string]*verifier // verifiers of drives that stopped with an error, by migration ID

	// beforeApply, set only by tests, runs before every batch is applied to a target.
	beforeApply func(ctx context.Context, r *run, items []item)
}

// shard is one named shard: its client and routing's view of it.
type shard struct {
	name string
	c    ShardClient
	r    *routing.Shard
}

// New returns a Coordinator over the control Redis (where routing's table and the migration
// journal live) and the shards named in o.Shards.
func New(control Control, o Options) (*Coordinator, error) {
	if control == nil {
		return nil, invalidOption("migrate: control client must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	store, err := routing.NewStore(control, routing.StoreOptions{Prefix: o.Prefix})
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	c := &Coordinator{control: control, store: store, shards: make(map[string]*shard, len(o.Shards)),
		keys: routing.Keys{Prefix: o.Prefix}, o: o}
	for name, cl := range o.Shards {
		rs, err := routing.NewShard(name, cl, routing.ShardOptions{Prefix: o.Prefix, Clock: o.Clock,
			TombstoneRetention: o.TombstoneRetention})
		if err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		c.shards[name] = &shard{name: name, c: cl, r: rs}
	}
	return c, nil
}

// Spec asks for one migration.
type Spec struct {
	// ID names the migration; it must be unique. Default: a fresh random ID.
	ID string
	// Unit is the placement unit to move: a bucket, an overridden tenant, or one sub-bucket
	// of a spread tenant.
	Unit routing.Unit
	// Source, if set, must be the shard the current table assigns the unit to.
	Source string
	// Target is the shard the unit moves to.
	Target string
}

// Start checks spec against the current route table and the source's ownership record,
// writes the migration's journal record (state OwnedA) and takes the unit's migration lock.
// It changes nothing on the shards. It fails with ErrInvalid for an unknown unit or
// shard or a target equal to the source, with ErrBusy when another migration holds the unit,
// and with ErrOwnershipChanged when the source does not hold the unit open. Start with the
// ID of an existing migration of the same unit and target returns that migration's status
// (a retry after a lost reply); with another unit or target it fails with ErrInvalid.
func (c *Coordinator) Start(ctx context.Context, spec Spec) (Status, error) {
	if err := spec.Unit.Validate(); err != nil {
		return Status{}, invalidf("unit: %v", err)
	}
	if spec.ID == "" {
		spec.ID = c.o.NewID()
	}
	if err := checkID(spec.ID); err != nil {
		return Status{}, err
	}
	same := func(prev Status) bool {
		return prev.Unit == spec.Unit && prev.Target == spec.Target && (spec.Source == "" || spec.Source == prev.Source)
	}
	// Starting again after a lost reply finds the record the first attempt wrote.
	if prev, found, err := c.replay(ctx, spec.ID, same); found || err != nil {
		return prev, err
	}
	s, err := c.start(ctx, spec)
	if err != nil {
		// Another Start of the same migration may have created it, and even driven it to
		// its end, between the first read and the checks: then this is a retry of it.
		if prev, lerr := c.load(ctx, spec.ID); lerr == nil && same(prev) {
			return prev, nil
		}
	}
	return s, err
}

// start is Start for an ID that had no journal record when Start began.
func (c *Coordinator) start(ctx context.Context, spec Spec) (Status, error) {
	t, err := c.store.Load(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start: %w", err)
	}
	source := t.Owner(spec.Unit)
	switch {
	case source == "":
		return Status{}, invalidf("the table (generation %d) does not assign %s (a tenant in a shared bucket leaves it with Carve)", t.Generation, spec.Unit)
	case spec.Source != "" && spec.Source != source:
		return Status{}, invalidf("%s is on shard %q, not on the given source %q", spec.Unit, source, spec.Source)
	case spec.Target == source:
		return Status{}, invalidf("target %q is the source of %s", spec.Target, spec.Unit)
	case c.shards[spec.Target] == nil:
		return Status{}, invalidf("unknown target shard %q", spec.Target)
	case c.shards[source] == nil:
		return Status{}, invalidf("no client for source shard %q", source)
	}
	if !containsShard(t, spec.Target) {
		return Status{}, invalidf("target shard %q is not named in the table (generation %d)", spec.Target, t.Generation)
	}
	if err := c.busy(ctx, Status{ID: spec.ID, Unit: spec.Unit}); err != nil {
		return Status{}, err
	}
	own, _, err := c.shards[source].r.Ownership(ctx, spec.Unit)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start: %w", err)
	}
	if err := checkOpen("source", source, spec.Unit, own, t); err != nil {
		return Status{}, err
	}
	tgt, _, err := c.shards[spec.Target].r.Ownership(ctx, spec.Unit)
	if err != nil {
		return Status{}, fmt.Errorf("migrate: start: %w", err)
	}
	if err := c.checkImport(ctx, spec.Target, spec.Unit, spec.ID, tgt); err != nil {
		return Status{}, err
	}
	return c.record(ctx, Status{ID: spec.ID, Unit: spec.Unit, Source: source, Target: spec.Target, State: OwnedA,
		SourceGen: own.Generation, ImportGen: max(t.Generation+1, tgt.Generation), Created: c.o.Clock()})
}

// replay looks up the journal record of migration id, for a start that may be a retry
// after a lost reply: found is true (with the record) when one exists and same accepts
// it; a record same refuses fails with ErrInvalid (the ID is taken); no record returns
// found false and no error.
func (c *Coordinator) replay(ctx context.Context, id string, same func(prev Status) bool) (prev Status, found bool, err error) {
	prev, err = c.load(ctx, id)
	switch {
	case err == nil && same(prev):
		return prev, true, nil
	case err == nil:
		return Status{}, false, invalidf("migration ID %q is already used for %s -> %q", id, prev.Unit, prev.Target)
	case errors.Is(err, ErrNotFound):
		return Status{}, false, nil
	}
	return Status{}, false, err
}

// checkOpen refuses a shard (role "source" or "target") whose ownership record own does
// not hold unit u open at or below table t's generation; it is pure.
func checkOpen(role, shard string, u routing.Unit, own routing.Ownership, t *routing.Table) error {
	if own.State != routing.StateOpen || own.Generation > t.Generation {
		return fmt.Errorf("%w: %s %q holds %s as %v, table generation %d",
			ErrOwnershipChanged, role, shard, u, own, t.Generation)
	}
	return nil
}

// checkImport refuses a target whose ownership record tgt holds unit u open, or holds an
// import claim on it that is not migration id's.
func (c *Coordinator) checkImport(ctx context.Context, target string, u routing.Unit, id string, tgt routing.Ownership) error {
	if tgt.State == routing.StateOpen {
		return fmt.Errorf("%w: target %q holds %s open (%v)", ErrOwnershipChanged, target, u, tgt)
	}
	if tgt.State == routing.StateImporting && !c.claimedBy(ctx, target, u, id) {
		return fmt.Errorf("%w: target %q holds an import claim on %s (%v); see Claims, and ClearClaim if its migration is finished",
			ErrOwnershipChanged, target, u, tgt)
	}
	return nil
}

// record writes the journal record of a new migration s (taking its locks), counts it as
// started and returns it as stored.
func (c *Coordinator) record(ctx context.Context, s Status) (Status, error) {
	if err := c.create(ctx, s); err != nil {
		return Status{}, err
	}
	c.stats.started.Add(1)
	return c.load(ctx, s.ID)
}

// hasShard reports whether the coordinator has a client for shard name.
func (c *Coordinator) hasShard(name string) bool { return c.shards[name] != nil }

func containsShard(t *routing.Table, name string) bool {
	for _, s := range t.Shards {
		if s == name {
			return true
		}
	}
	return false
}

// Migrate starts a migration and drives it to its end: [Coordinator.Start] then
// [Coordinator.Resume].
func (c *Coordinator) Migrate(ctx context.Context, spec Spec) (Status, error) {
	s, err := c.Start(ctx, spec)
	if err != nil {
		return s, err
	}
	return c.Resume(ctx, s.ID)
}

// Resume drives migration id from the state in its journal to its end: OwnedB (nil error),
// Cancelled (ErrCancelled) or Aborted (ErrAborted, with the reason). It is how a migration
// continues after its driver died at any point; every step re-checks the shards instead of
// assuming that a step whose reply was lost did not happen. If ctx ends, Resume returns
// ctx's error and the migration stays where the journal says; call Resume again.
//
// One driver at a time: Resume first takes the migration over with a new fencing epoch,
// written to the journal before it acts. While another driver's lease runs (see
// Options.LeaseTTL), Resume waits for it to end (or for the migration to end) instead; so a
// second Migrate or Resume of a running migration waits, and a driver that crashed or was
// stopped is taken over once its lease expires. Every step a driver takes (journal writes,
// shard scripts, the table publication) carries its epoch and is refused, in the same
// atomic step, once a newer driver took over: the old driver then returns an error wrapping
// ErrFenced and has changed nothing since. A Resume that gave up waiting returns
// ErrDriverBusy.
func (c *Coordinator) Resume(ctx context.Context, id string) (Status, error) {
	r, err := c.acquire(ctx, id, false, driverStates)
	if err != nil {
		return r.Status, err
	}
	if r.epoch == 0 {
		// A final state: report it.
		return r.Status, c.drive(ctx, r)
	}
	c.resumeVerifier(r)
	dctx, stop := c.heartbeat(ctx, r)
	err = c.drive(dctx, r)
	stop()
	if err != nil {
		c.keep(r)
	}
	if fe := fencedCause(dctx); err != nil && fe != nil && ctx.Err() == nil {
		err = fe
	}
	if errors.Is(err, ErrFenced) {
		// Report where the driver that took over has the migration now.
		if s, lerr := c.load(ctx, id); lerr == nil {
			r.Status = s
			var fe *FencedError
			if errors.As(err, &fe) {
				fe.State = s.State
			}
		}
	}
	return r.Status, err
}

// Status returns migration id's journal record.
func (c *Coordinator) Status(ctx context.Context, id string) (Status, error) {
	return c.load(ctx, id)
}

// run is one drive of one migration: its journal record and what this process learned on
// the way (the verifier of the copy, kept from CatchingUp to ClosedA).
type run struct {
	Status
	epoch uint64 // epoch is this drive's fencing epoch (0: not a driver)
	ver   *verifier
	cause error // cause is why this drive aborted the migration, if it did

	lane int       // lane is 1 + the index of a split's source this run drives (0: none)
	sver *verifier // sver is a split's verifier, kept from CatchingUp to ClosedA
}

// abortError asks drive to abort the migration with cause; reopen says whether the source
// was closed by this migration and must be reopened.
type abortError struct {
	cause  error
	reopen bool
}

func (e *abortError) Error() string { return e.cause.Error() }
func (e *abortError) Unwrap() error { return e.cause }

func abortf(reopen bool, err error) error { return &abortError{cause: err, reopen: reopen} }

// drive runs the migration's state machine from r's state to a final state: each step
// (advance) moves the journal on; a step's error is handled (onStepError) and the journal
// re-read (reload) before the next step.
func (c *Coordinator) drive(ctx context.Context, r *run) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if final, err := r.outcome(); final {
			return err
		}
		err := c.advance(ctx, r)
		if err == nil {
			continue
		}
		if err := c.onStepError(ctx, r, err); err != nil {
			return err
		}
		if err := c.reload(ctx, r); err != nil {
			return err
		}
	}
}

// outcome reports whether drive stops at r's state, and with which error: none for
// OwnedB, ErrCancelled, ErrAborted (with this drive's cause, or the journal's reason), or
// an unknown state. It is pure.
func (r *run) outcome() (final bool, err error) {
	switch r.State {
	case OwnedA, Copying, CatchingUp, ClosedA, ReadyB, Cancelling:
		return false, nil
	case OwnedB:
		return true, nil
	case Cancelled:
		return true, fmt.Errorf("%w: %s", ErrCancelled, r.Reason)
	case Aborted:
		if r.cause != nil {
			return true, fmt.Errorf("%w: %w", ErrAborted, r.cause)
		}
		return true, fmt.Errorf("%w: %s", ErrAborted, r.Reason)
	}
	return true, fmt.Errorf("migrate: migration %q has unknown state %q", r.ID, r.State)
}

// advance runs the step of r's (non-final) state.
func (c *Coordinator) advance(ctx context.Context, r *run) error {
	switch r.State {
	case OwnedA:
		return c.claim(ctx, r)
	case Copying:
		if err := c.snapshot(ctx, r, Copying); err != nil {
			return err
		}
		return c.step(ctx, r, []State{Copying}, CatchingUp, false, "cursor", "done")
	case CatchingUp:
		return c.catchUp(ctx, r)
	case ClosedA:
		return c.closeSource(ctx, r)
	case ReadyB:
		return c.flip(ctx, r)
	case Cancelling:
		return c.finishCancel(ctx, r)
	}
	return fmt.Errorf("migrate: migration %q has unknown state %q", r.ID, r.State)
}

// onStepError handles a step's error err: nil to carry on from the journal (after moving
// it to Cancelling for an abort), or the error drive returns.
func (c *Coordinator) onStepError(ctx context.Context, r *run, err error) error {
	var ab *abortError
	var se *stateError
	switch {
	case errors.Is(err, ErrFenced):
		// Another driver took over: this one stops, having changed nothing since.
		return err
	case errors.As(err, &ab) && r.State == Cancelling:
		// Removing the target's copy was refused: stop instead of stepping in place.
		return fmt.Errorf("migrate: migration %q cannot finish cancelling: %w", r.ID, err)
	case errors.As(err, &ab):
		r.cause = ab.cause
		reopen := "0"
		if ab.reopen || r.State == ClosedA || r.State == ReadyB {
			// From ClosedA on the source may be closed by this migration: reopen it
			// (a compare-and-set from closed at SourceGen; nothing if it is not).
			reopen = "1"
		}
		// From ReadyB only a flip that found its target unopened aborts (openTarget): no
		// table names the target yet.
		err = c.step(ctx, r, []State{OwnedA, Copying, CatchingUp, ClosedA, ReadyB}, Cancelling, false,
			"reason", ab.cause.Error(), "abort", "1", "reopen", reopen)
		if err != nil && !errors.As(err, &se) {
			return err
		}
		return nil
	case errors.As(err, &se):
		// Someone else moved the journal (a Cancel, another driver): continue from there.
		return nil
	}
	return err
}

// reload re-reads r's journal record; a record another driver's epoch now holds ends this
// drive with ErrFenced.
func (c *Coordinator) reload(ctx context.Context, r *run) error {
	s, err := c.load(ctx, r.ID)
	if err != nil {
		return err
	}
	if r.epoch > 0 && s.Epoch != r.epoch {
		// Another driver holds the migration now: whatever state it reached is its
		// doing, not this drive's.
		c.stats.fenced.Add(1)
		return &FencedError{ID: r.ID, Epoch: r.epoch, Current: s.Epoch, Where: "journal", State: s.State}
	}
	r.Status = s
	return nil
}

// Unfinished returns the status of every migration that has not reached a final state,
// oldest first: what a restarted process should Resume (or an operator Cancel). Cache-mode
// moves that are warming, flipped (awaiting Finish or Rollback) or rolling back are listed
// too, marked Status.Cache; they are continued with [Cache.Resume].
func (c *Coordinator) Unfinished(ctx context.Context) ([]Status, error) {
	ids, err := bound.Do(ctx, func() ([]string, error) { return c.control.ZRange(ctx, c.indexKey(), 0, -1).Result() })
	if err != nil {
		return nil, fmt.Errorf("migrate: list migrations: %w", err)
	}
	var out []Status
	for _, id := range ids {
		m, err := bound.Do(ctx, func() (map[string]string, error) { return c.control.HGetAll(ctx, c.journalKey(id)).Result() })
		if err != nil {
			return nil, fmt.Errorf("migrate: list migrations: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		if m["mode"] == "cache" {
			if st := State(m["state"]); st == CacheWarming || st == CacheFlipped || st == CacheRollingBack {
				out = append(out, Status{ID: id, Cache: true, Unit: routing.TenantUnit(m["tenant"]),
					Source: m["source"], Target: m["target"], State: st})
			}
			continue
		}
		s, err := parseStatus(m)
		if err != nil {
			return nil, err
		}
		if !s.State.Terminal() {
			out = append(out, s)
		}
	}
	return out, nil
}

// claimedBy reports whether unit u's import claim on shard is migration id's (a second
// Start of the same migration racing the first).
func (c *Coordinator) claimedBy(ctx context.Context, shard string, u routing.Unit, id string) bool {
	v, err := bound.Do(ctx, func() ([]any, error) {
		return c.shards[shard].c.HMGet(ctx, routingfmt.Keys(c.keys.Tag(u)).Own, "mig").Result()
	})
	if err != nil || len(v) != 1 {
		return false
	}
	m, _ := v[0].(string)
	return m == id
}
