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
		return nil, errors.New("escrow: NewRebalancer needs a pool")
	}
	if opts.Batch == 0 {
		opts.Batch = max(1, p.opts.Capacity/(10*len(p.order)))
	}
	if opts.High == 0 {
		opts.High = opts.Low + 2*opts.Batch
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultRebalanceInterval
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	switch {
	case opts.Low < 0:
		return nil, fmt.Errorf("%w: RebalanceOptions.Low must be >= 0, got %d", ErrInvalid, opts.Low)
	case opts.Batch < 1 || opts.Batch > p.opts.Capacity:
		return nil, fmt.Errorf("%w: RebalanceOptions.Batch must be 1..%d, got %d", ErrInvalid, p.opts.Capacity, opts.Batch)
	case opts.High <= opts.Low+opts.Batch:
		return nil, fmt.Errorf("%w: RebalanceOptions.High must be > Low+Batch (%d), got %d", ErrInvalid, opts.Low+opts.Batch, opts.High)
	case opts.Interval < 0:
		return nil, fmt.Errorf("%w: RebalanceOptions.Interval must be >= 0, got %s", ErrInvalid, opts.Interval)
	}
	return &Rebalancer{p: p, opts: opts}, nil
}

// Step runs one pass: it first settles pending transfers (Pool.Recover), then, if some owner
// is busy and another idle, moves Batch permits from the idlest to the busiest. It returns the
// number of permits moved (0 or Batch).
func (r *Rebalancer) Step(ctx context.Context) (int, error) {
	if _, err := r.p.Recover(ctx); err != nil {
		return 0, err
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
