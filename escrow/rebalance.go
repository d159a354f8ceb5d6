package escrow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"
)

// Defaults of RebalanceOptions.
const (
	// DefaultRebalanceInterval is the pause between passes of Rebalancer.Run.
	DefaultRebalanceInterval = time.Second
)

// RebalanceOptions configures a Rebalancer. An owner with at most Low free permits is busy;
// one with at least High free permits is idle; a pass moves Batch permits from the idlest to
// the busiest owner. Low+Batch < High is required: after a move the receiver is still below
// High and the giver still above Low, so a move never triggers the move back (hysteresis).
type RebalanceOptions struct {
	// Low is the busy threshold. Default: 0 (an owner is busy when none of its permits is free).
	Low int
	// High is the idle threshold. Default: Low + 2*Batch.
	High int
	// Batch is the number of permits per transfer. Default: max(1, Capacity/(10*owners)).
	Batch int
	// Interval is the pause between passes of Run. Default: DefaultRebalanceInterval.
	Interval time.Duration
	// Rand is the source of transfer IDs. Default: crypto/rand.Reader.
	Rand io.Reader
	// Logger receives one line per move. Default: none.
	Logger *slog.Logger
}

// Rebalancer moves free permits from idle owners to busy ones through the transfer protocol
// (Pool.Transfer), so it is exactly as safe as a transfer: a crash leaves at most a pending
// transfer, which its next pass (or anyone's Pool.Recover) finishes. It starts no goroutine:
// the host runs Run in a goroutine of its own, or calls Step.
type Rebalancer struct {
	p    *Pool
	opts RebalanceOptions
}

// NewRebalancer validates the options and returns a rebalancer for p.
func NewRebalancer(p *Pool, opts RebalanceOptions) (*Rebalancer, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: NewRebalancer needs a pool", ErrInvalid)
	}
	opts, err := opts.withDefaults(p.opts.Capacity, len(p.order))
	if err != nil {
		return nil, err
	}
	return &Rebalancer{p: p, opts: opts}, nil
}

// withDefaults validates o for a pool of capacity permits split among owners, and fills its
// zero fields with the defaults.
func (o RebalanceOptions) withDefaults(capacity, owners int) (RebalanceOptions, error) {
	if o.Batch == 0 {
		o.Batch = max(1, capacity/(10*owners))
	}
	if o.High == 0 {
		o.High = o.Low + 2*o.Batch
	}
	if o.Interval == 0 {
		o.Interval = DefaultRebalanceInterval
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	switch {
	case o.Low < 0:
		return o, fmt.Errorf("%w: RebalanceOptions.Low must be >= 0, got %d", ErrInvalid, o.Low)
	case o.Batch < 1 || o.Batch > capacity:
		return o, fmt.Errorf("%w: RebalanceOptions.Batch must be 1..%d, got %d", ErrInvalid, capacity, o.Batch)
	case o.High <= o.Low+o.Batch:
		return o, fmt.Errorf("%w: RebalanceOptions.High must be > Low+Batch (%d), got %d", ErrInvalid, o.Low+o.Batch, o.High)
	case o.Interval < 0:
		return o, fmt.Errorf("%w: RebalanceOptions.Interval must be >= 0, got %s", ErrInvalid, o.Interval)
	}
	return o, nil
}

// Step runs one pass: it first settles pending transfers (Pool.Recover) and takes back the
// permits of dead holders (Pool.Sweep: leases that ended more than LeaseSkew ago), then, if
// some owner is busy and another idle, moves Batch permits from the idlest to the busiest.
// It returns the number of permits moved (0 or Batch). Fenced and missing ledgers are left
// out of the pass.
func (r *Rebalancer) Step(ctx context.Context) (int, error) {
	if _, err := r.p.Recover(ctx); err != nil {
		return 0, err
	}
	for _, name := range r.p.order {
		_, err := r.p.ledgers[name].sweep(ctx, r.p.c, &r.p.stats, r.p.opts.LeaseSkew)
		if err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrLedgerMissing) {
			return 0, err
		}
	}
	rep, err := r.p.Audit(ctx)
	if err != nil {
		return 0, err
	}
	owners := make([]OwnerAudit, 0, len(rep.Owners))
	for _, o := range rep.Owners {
		if o.Exists && !o.Fenced && o.Seq >= o.Witness {
			owners = append(owners, o)
		}
	}
	if len(owners) < 2 {
		return 0, nil
	}
	sort.SliceStable(owners, func(i, j int) bool { return owners[i].Free < owners[j].Free })
	busy, idle := owners[0], owners[len(owners)-1]
	if busy.Free > r.opts.Low || idle.Free < r.opts.High {
		return 0, nil
	}
	var raw [12]byte
	if _, err := io.ReadFull(r.opts.Rand, raw[:]); err != nil {
		return 0, fmt.Errorf("escrow: transfer ID: %w", err)
	}
	id := "rebalance-" + hex.EncodeToString(raw[:])
	if err := r.p.Transfer(ctx, idle.Owner, busy.Owner, r.opts.Batch, id); err != nil {
		return 0, err
	}
	if r.opts.Logger != nil {
		r.opts.Logger.Info("escrow: rebalanced", "from", idle.Owner, "to", busy.Owner, "permits", r.opts.Batch, "transfer", id)
	}
	return r.opts.Batch, nil
}

// Run calls Step every Interval until ctx ends, and returns ctx's error. Errors of a pass
// are logged and the next pass retries (pending transfers are settled first).
func (r *Rebalancer) Run(ctx context.Context) error {
	t := time.NewTicker(max(r.opts.Interval, time.Millisecond))
	defer t.Stop()
	for {
		if _, err := r.Step(ctx); err != nil && ctx.Err() == nil && r.opts.Logger != nil {
			r.opts.Logger.Warn("escrow: rebalance pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
