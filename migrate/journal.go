package migrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/routing"
)

// journalTag is the prefix of every journal key. It carries routing's control hash tag
// ("{<prefix>:table}"), so one script can touch a record, the unit's lock and epoch counter,
// and the route table (a publication guarded by the driver's epoch) on a clustered control
// Redis.
func journalTag(prefix string) string { return routing.Keys{Prefix: prefix}.ControlTag() + ":migrate" }

func (c *Coordinator) journalTag() string { return journalTag(c.o.Prefix) }

// epochKey is the unit's fencing-epoch counter.
func (c *Coordinator) epochKey(u routing.Unit) string {
	return c.journalTag() + ":epoch:" + c.keys.Tag(u)
}

func (c *Coordinator) journalKey(id string) string { return c.journalTag() + ":j:" + id }

func (c *Coordinator) lockKey(s Status) string {
	return c.journalTag() + ":lock:" + c.keys.Tag(s.lockUnit())
}

func (c *Coordinator) indexKey() string { return c.journalTag() + ":index" }

// create writes a new journal record and takes the unit's lock.
func (c *Coordinator) create(ctx context.Context, s Status) error {
	args := []any{s.ID, ms(s.Created)}
	args = append(args, s.fields()...)
	args = append(args, "state", string(s.State))
	reply, err := createScript.Run(ctx, c.control,
		append([]string{c.journalKey(s.ID), c.lockKey(s), c.indexKey()}, c.lockKeys(s)...), args...).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: create journal record %q: %w", s.ID, err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "ok":
		return nil
	case len(reply) == 2 && reply[0] == "busy":
		return &BusyError{Unit: s.Unit.String(), Holder: reply[1]}
	case len(reply) == 1 && reply[0] == "exists":
		return invalidf("migration ID %q is already used", s.ID)
	}
	return fmt.Errorf("migrate: create journal record %q: malformed reply %q", s.ID, reply)
}

// busy returns a *BusyError when a migration other than s holds one of the locks s would
// take, nil when none does. create.lua takes the locks in one atomic step and stays the
// authority; this read only lets a Start name the holder before it reads the shards, where
// a running migration's claim on the target would otherwise look like a stuck one.
func (c *Coordinator) busy(ctx context.Context, s Status) error {
	reply, err := holdersScript.Run(ctx, c.control, append([]string{c.lockKey(s)}, c.lockKeys(s)...)).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: read migration locks: %w", err)
	}
	if len(reply) < 1 || reply[0] != "ok" {
		return fmt.Errorf("migrate: read migration locks: malformed reply %q", reply)
	}
	for _, holder := range reply[1:] {
		if holder != "" && holder != s.ID {
			return &BusyError{Unit: s.Unit.String(), Holder: holder}
		}
	}
	return nil
}

// load reads a migration's journal record.
func (c *Coordinator) load(ctx context.Context, id string) (Status, error) {
	if id == "" {
		return Status{}, invalidf("empty migration ID")
	}
	m, err := bound.Do(ctx, func() (map[string]string, error) { return c.control.HGetAll(ctx, c.journalKey(id)).Result() })
	if err != nil {
		return Status{}, fmt.Errorf("migrate: read journal record %q: %w", id, err)
	}
	if len(m) == 0 {
		return Status{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return parseStatus(m)
}

// stateError reports that the journal's state was not one a step expected.
type stateError struct {
	id    string
	found State
	want  []State
}

func (e *stateError) Error() string {
	return fmt.Sprintf("migrate: migration %q is %s, expected one of %v", e.id, e.found, e.want)
}

func (e *stateError) Is(target error) bool {
	return target == ErrCancelled && (e.found == Cancelling || e.found == Cancelled)
}

// step moves the journal record from one of the expected states to state `to` and sets the
// given fields, by compare-and-set, if r still drives the migration (its epoch is the
// record's; otherwise a [*FencedError]), and stores the record the script returns into
// r.Status. A retry of a step that already happened (the record is at `to` already and `to`
// is not among the expected states) is taken as done: the record is reloaded as it is.
// release frees the unit's lock. Every step renews r's lease.
func (c *Coordinator) step(ctx context.Context, r *run, expect []State, to State, release bool, kv ...string) error {
	s := &r.Status
	args := stepArgs(expect, to, release, s.ID, r.epoch, c.o.LeaseTTL, c.o.Clock(), r.laneFields(kv))
	reply, err := stepScript.Run(ctx, c.control, append([]string{c.journalKey(s.ID), c.lockKey(*s)}, c.lockKeys(*s)...), args...).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: journal step of %q to %s: %w", s.ID, to, err)
	}
	ns, err := c.stepReply(ctx, r, expect, to, reply)
	if err != nil {
		return err
	}
	prev := s.State
	*s = r.view(ns)
	if prev != s.State {
		c.stats.steps.Add(1)
		if c.o.Logger != nil {
			c.o.Logger.InfoContext(ctx, "migrate: state change", "id", s.ID, "unit", s.Unit.String(),
				"source", s.Source, "target", s.Target, "from", string(prev), "to", string(s.State), "reason", s.Reason)
		}
	}
	if c.o.OnState != nil {
		c.o.OnState(*s)
	}
	return nil
}

// stepArgs are step.lua's ARGV for a step of migration id from one of expect to `to` by a
// driver with fencing epoch (0: none) and lease ttl at now, setting fields kv. It is pure.
func stepArgs(expect []State, to State, release bool, id string, epoch uint64, ttl time.Duration, now time.Time, kv []string) []any {
	rel := "0"
	if release {
		rel = "1"
	}
	exp := make([]string, len(expect))
	for i, e := range expect {
		exp[i] = string(e)
	}
	ep := "-"
	if epoch > 0 {
		ep = u64(epoch)
	}
	args := []any{strings.Join(exp, ","), string(to), rel, id, ep, i64(ttl.Milliseconds()), "updated", ms(now)}
	for _, v := range kv {
		args = append(args, v)
	}
	return args
}

// stepReply turns step.lua's reply into the record as it now stands: the record the
// script returns, or the stored one for a step that already happened; a record in another
// state, a missing record, a newer epoch or a malformed reply is an error.
func (c *Coordinator) stepReply(ctx context.Context, r *run, expect []State, to State, reply []string) (Status, error) {
	id := r.ID
	switch {
	case len(reply) >= 2 && len(reply)%2 == 0 && reply[0] == "ok":
		m := make(map[string]string, len(reply)/2)
		for i := 2; i+1 < len(reply); i += 2 {
			m[reply[i]] = reply[i+1]
		}
		return parseStatus(m)
	case len(reply) == 2 && reply[0] == "changed":
		if State(reply[1]) != to {
			return Status{}, &stateError{id: id, found: State(reply[1]), want: expect}
		}
		return c.load(ctx, id)
	case len(reply) == 1 && reply[0] == "missing":
		return Status{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	case len(reply) == 2 && reply[0] == "fenced":
		cur, _ := strconv.ParseUint(reply[1], 10, 64)
		c.stats.fenced.Add(1)
		return Status{}, &FencedError{ID: id, Epoch: r.epoch, Current: cur, Where: "journal"}
	}
	return Status{}, fmt.Errorf("migrate: journal step of %q: malformed reply %q", id, reply)
}

// driverStates are the states in which a driver (Resume) takes a migration over.
var driverStates = strings.Join([]string{string(OwnedA), string(Copying), string(CatchingUp), string(ClosedA),
	string(ReadyB), string(Cancelling)}, ",")

// cancelStates are the states in which Cancel takes a migration over, even from a live driver.
var cancelStates = strings.Join([]string{string(OwnedA), string(Copying), string(CatchingUp), string(Cancelling)}, ",")

// acquire makes the caller the driver of migration id with a new fencing epoch (acquire.lua).
// Without force it waits while another driver's lease runs, until the lease ends or ctx
// does. With `to` (a state, then field/value pairs), the record moves to that state in the
// same step, unless it is there already. It returns the journal record after the takeover, with epoch 0 when the migration
// is in none of the given states (nothing was taken over).
//
// The takeover is idempotent by its holder token, one per call: when a reply is lost (the
// script ran or not), the call retries with the same token, and a takeover that already
// happened returns the same epoch instead of taking a new one, so a lost reply never leaves
// the lease to a token nobody holds. If the record cannot be read after the takeover, the
// lease is released before returning; if another driver took over by the time it is read,
// the caller is fenced. After lostReplyRetries lost replies in a row the call gives up: a
// takeover that did happen then holds the lease for a token nobody holds until it runs out
// (LeaseTTL), as for a driver that crashed right after taking over.
func (c *Coordinator) acquire(ctx context.Context, id string, force bool, states string, to ...string) (*run, error) {
	s, err := c.loadRetrying(ctx, id)
	if err != nil {
		return &run{Status: s}, err
	}
	args := acquireArgs(newToken(), c.o.LeaseTTL, force, states, to)
	for {
		var reply []string
		err := retryLost(ctx, func() (err error) {
			reply, err = acquireScript.Run(ctx, c.control, c.epochKeys(s, id), args...).StringSlice()
			return err
		})
		if err != nil {
			return &run{Status: s}, fmt.Errorf("migrate: take over migration %q: %w", id, err)
		}
		switch {
		case len(reply) == 2 && reply[0] == "ok":
			e, _ := strconv.ParseUint(reply[1], 10, 64)
			return c.tookOver(ctx, id, e)
		case len(reply) == 2 && reply[0] == "state":
			s, err := c.loadRetrying(ctx, id)
			return &run{Status: s}, err
		case len(reply) == 1 && reply[0] == "missing":
			return &run{Status: s}, fmt.Errorf("%w: %q", ErrNotFound, id)
		case len(reply) == 3 && reply[0] == "held":
			left, _ := strconv.ParseInt(reply[2], 10, 64)
			t := time.NewTimer(heldWait(left, c.o.LeaseTTL))
			select {
			case <-ctx.Done():
				t.Stop()
				return &run{Status: s}, fmt.Errorf("%w (waiting for driver %q of migration %q): %w", ErrDriverBusy, reply[1], id, ctx.Err())
			case <-t.C:
			}
		default:
			return &run{Status: s}, fmt.Errorf("migrate: take over migration %q: malformed reply %q", id, reply)
		}
	}
}

// acquireArgs are acquire.lua's ARGV for a takeover by holder with lease ttl, from one of
// states (force: past a running lease), moving to `to` (a state, then field/value pairs).
// It is pure.
func acquireArgs(holder string, ttl time.Duration, force bool, states string, to []string) []any {
	f := "0"
	if force {
		f = "1"
	}
	args := []any{holder, i64(ttl.Milliseconds()), f, states}
	for _, v := range to {
		args = append(args, v)
	}
	return args
}

// heldWait is how long a takeover waits before trying again while another driver's lease
// runs for `left` more milliseconds: until it ends, but at most a quarter of ttl (the
// holder may release it early). It is pure.
func heldWait(left int64, ttl time.Duration) time.Duration {
	return min(time.Duration(left+1)*time.Millisecond, ttl/4+time.Millisecond)
}

// tookOver reads migration id's record after a takeover with epoch e. If it cannot be
// read, the lease is released; if another driver took over meanwhile, the caller is fenced.
func (c *Coordinator) tookOver(ctx context.Context, id string, e uint64) (*run, error) {
	c.stats.takeovers.Add(1)
	s, err := c.loadRetrying(ctx, id)
	if err != nil {
		c.release(ctx, id, e)
		return &run{Status: s}, err
	}
	if s.Epoch != e {
		// The caller stopped between its takeover and this read, long enough for
		// its lease to run out and another driver to take over (and maybe finish).
		c.stats.fenced.Add(1)
		return &run{Status: s}, &FencedError{ID: id, Epoch: e, Current: s.Epoch, Where: "journal", State: s.State}
	}
	return &run{Status: s, epoch: e}, nil
}

// heartbeat renews r's lease every LeaseTTL/3 until stop is called. If another driver took
// the migration over, it cancels the returned context with a [*FencedError] as its cause,
// so the drive stops at its next step even if that step only reads.
func (c *Coordinator) heartbeat(ctx context.Context, r *run) (context.Context, func()) {
	hctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	id, epoch := r.ID, r.epoch
	go func() {
		defer close(done)
		t := time.NewTicker(c.o.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			reply, err := renewScript.Run(hctx, c.control, []string{c.journalKey(id)}, u64(epoch),
				i64(c.o.LeaseTTL.Milliseconds())).StringSlice()
			if err == nil && len(reply) == 2 && reply[0] == "fenced" {
				cur, _ := strconv.ParseUint(reply[1], 10, 64)
				cancel(&FencedError{ID: id, Epoch: epoch, Current: cur, Where: "lease"})
				return
			}
		}
	}()
	return hctx, func() {
		cancel(nil)
		<-done
		c.release(ctx, id, epoch)
	}
}

// release ends the lease of the drive with this epoch, so that the next driver takes over at
// once (retried after a lost reply: releasing twice is releasing once; a fenced drive's
// release changes nothing).
func (c *Coordinator) release(ctx context.Context, id string, epoch uint64) {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.LeaseTTL)
	defer rcancel()
	_ = retryLost(rctx, func() error {
		return renewScript.Run(rctx, c.control, []string{c.journalKey(id)}, u64(epoch), "0").Err()
	})
}

// loadRetrying is load, retried after a lost reply (see retryLost).
func (c *Coordinator) loadRetrying(ctx context.Context, id string) (s Status, err error) {
	err = retryLost(ctx, func() error {
		s, err = c.load(ctx, id)
		return err
	})
	return s, err
}

// lostReplyRetries bounds the attempts of retryLost.
const lostReplyRetries = 6

// retryLost runs f, an idempotent command on the control Redis, and runs it again (a few
// times, with a short backoff) when it failed without a reply from Redis: a broken
// connection or a lost reply. A reply from Redis (an error reply, a result) and the end of
// ctx are final.
func retryLost(ctx context.Context, f func() error) error {
	wait := 2 * time.Millisecond
	for i := 1; ; i++ {
		err := f()
		if err == nil || i == lostReplyRetries || ctx.Err() != nil || !lostReply(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// lostReply reports whether err is a failure to hear from Redis (the command may or may not
// have run), as opposed to a reply or a local error.
func lostReply(err error) bool {
	var re redis.Error
	if errors.As(err, &re) || errors.Is(err, redis.Nil) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// fencedCause returns the drive's fencing error if its heartbeat stopped it.
func fencedCause(ctx context.Context) error {
	var fe *FencedError
	if err := context.Cause(ctx); errors.As(err, &fe) {
		return fe
	}
	return nil
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
