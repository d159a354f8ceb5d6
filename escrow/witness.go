package escrow

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// witnessKey returns the key of the witness chain of the ledger whose first key is
// ledgerKey. Its hash tag names the slot half the slot space away from the ledger's, so on a
// cluster whose masters own contiguous ranges of fewer than 8192 slots each (every even split
// over two or more masters) it lives on another master than the ledger. The key depends on
// the ledger's key only, never on the topology, so every process agrees on it.
func witnessKey(prefix, tag, ledgerKey string) string {
	s := (slot.Of(ledgerKey) + slot.Count/2) % slot.Count
	return slot.Tagged(prefix, slot.TagFor(s)) + ":witness:" + tag
}

// readWitness returns the highest sequence the witness of owner has confirmed (0 if none).
func (p *Pool) readWitness(ctx context.Context, owner string) (int64, error) {
	zs, err := bound.Do(ctx, func() ([]redis.Z, error) { return p.w.ZRangeWithScores(ctx, p.witness[owner], -1, -1).Result() })
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("escrow: read witness of %q: %w", owner, noPermUnderDefault(err, p.opts.Prefix))
	}
	if len(zs) == 0 {
		return 0, nil
	}
	return int64(zs[0].Score), nil
}

// extend runs witness.lua on owner's chain. It returns the status, and the chain's top.
func (p *Pool) extend(ctx context.Context, owner, mode string, seg []step) (string, step, error) {
	args := make([]any, 0, 1+2*len(seg))
	args = append(args, mode)
	for _, s := range seg {
		args = append(args, s.seq, s.id)
	}
	r, err := runScript(ctx, p.w, witnessScript, []string{p.witness[owner]}, args...)
	if err != nil {
		return "", step{}, fmt.Errorf("escrow: witness of %q: %w", owner, err)
	}
	return r.status, step{seq: r.int(0), id: r.str(1)}, nil
}

// tailOf is what tail.lua read of a ledger's log.
type tailOf struct {
	seq    int64
	fenced bool
	mineID string
	low    int64
	steps  []step
}

func (l ledger) tail(ctx context.Context, c redis.Scripter, top, mine int64) (tailOf, error) {
	res, err := tailScript.Run(ctx, c, []string{l.meta(), l.log()}, top, mine).Slice()
	if err != nil {
		return tailOf{}, fmt.Errorf("escrow: read log of %q: %w", l.owner, err)
	}
	if len(res) != 5 {
		return tailOf{}, fmt.Errorf("escrow: read log of %q: unexpected reply", l.owner)
	}
	id, _ := res[2].(string)
	return tailOf{seq: toInt(res[0]), fenced: toInt(res[1]) == 1, mineID: id, low: toInt(res[3]), steps: parseSteps(res[4])}, nil
}

// confirm has owner's witness confirm the ledger's history up to the last step of seg (the
// state right after a script ran, which holds that script's effect), and returns nil only
// when that is proven; a step is acknowledged to a caller only after confirm returned nil.
//
// When the witness chain lags behind seg, confirm appends the ledger's newer steps. When the
// chain has moved past seg (other actors confirmed newer steps), confirm reads the ledger's
// log again, after the witness answered: the ledger must still hold the step, and its
// history must pass through the chain's top (so it lost nothing the chain had confirmed).
// When the witness shows another history than the ledger's, or the ledger is below the
// chain's top, or no longer holds the step, the ledger was restored to an earlier point:
// confirm fences it and returns ErrFenced. Either way the step is not acknowledged.
func (p *Pool) confirm(ctx context.Context, owner string, seg []step) error {
	if len(seg) == 0 {
		return fmt.Errorf("escrow: ledger of %q returned no log", owner)
	}
	l := p.ledgers[owner]
	mine := seg[len(seg)-1]
	for range 4 {
		status, top, err := p.extend(ctx, owner, "confirm", seg)
		if err != nil {
			return err
		}
		switch status {
		case "ok":
			return nil
		case "conflict":
			return p.fence(ctx, owner, mine.seq, top.seq)
		}
		t, err := l.tail(ctx, p.c, top.seq, mine.seq)
		if err != nil {
			return err
		}
		switch judgeTail(t, mine, top, status) {
		case tailFenced:
			return &FencedError{Owner: owner, LedgerSeq: t.seq, WitnessSeq: top.seq}
		case tailDiverged:
			return p.fence(ctx, owner, t.seq, top.seq)
		case tailStepGone:
			return fmt.Errorf("%w: owner %q, step %d is no longer in the ledger's log", ErrUnconfirmed, owner, mine.seq)
		case tailShort:
			return fmt.Errorf("%w: owner %q, the ledger's log no longer reaches the witness's step %d", ErrUnconfirmed, owner, top.seq)
		case tailConfirmed:
			return nil
		}
		seg = t.steps
	}
	return fmt.Errorf("%w: owner %q, step %d", ErrUnconfirmed, owner, mine.seq)
}

// tailVerdict is what confirm concludes from a reading of the ledger's log taken after the
// witness answered 'gap' or 'behind'.
type tailVerdict int

const (
	// tailMore: the chain lags behind the step; append the ledger's newer steps.
	tailMore tailVerdict = iota
	// tailConfirmed: the ledger's history holds every step the chain confirmed, and the step.
	tailConfirmed
	// tailFenced: the ledger is marked fenced already.
	tailFenced
	// tailDiverged: the ledger's history is not the confirmed one; fence it.
	tailDiverged
	// tailStepGone: the step is no longer in the ledger's log; it is not acknowledged.
	tailStepGone
	// tailShort: the log no longer reaches the chain's top; the step is not acknowledged.
	tailShort
)

// judgeTail decides, from the ledger's log t read after the witness answered status
// ('gap' or 'behind') with its top, whether the step mine is confirmed (pure: tested without
// Redis). The order of the checks is the argument of "Fencing against old state".
func judgeTail(t tailOf, mine, top step, status string) tailVerdict {
	switch {
	case t.fenced:
		return tailFenced
	case t.mineID != mine.id && t.low != 0 && t.low <= mine.seq:
		// The log covers the step's sequence with another step (or none): the ledger's
		// history is no longer the one the step was made in.
		return tailDiverged
	case t.mineID != mine.id:
		return tailStepGone
	case t.seq < top.seq:
		return tailDiverged
	case len(t.steps) == 0 || t.steps[0].seq > top.seq:
		return tailShort
	case t.steps[0] != top:
		// The ledger is at or above the chain's top, but its history does not pass through it.
		return tailDiverged
	case status == "behind":
		// Read after the witness answered, the ledger's history holds every step the chain
		// had confirmed, and still holds this one.
		return tailConfirmed
	}
	return tailMore
}

// confirmCurrent has owner's witness confirm the ledger's current state (Recover does it
// before it acts on what it read).
func (p *Pool) confirmCurrent(ctx context.Context, owner string) error {
	top, err := p.readWitness(ctx, owner)
	if err != nil {
		return err
	}
	t, err := p.ledgers[owner].tail(ctx, p.c, top, 0)
	if err != nil {
		return err
	}
	switch {
	case t.fenced:
		return &FencedError{Owner: owner, LedgerSeq: t.seq, WitnessSeq: top}
	case t.seq < top:
		return p.fence(ctx, owner, t.seq, top)
	case len(t.steps) == 0:
		return fmt.Errorf("%w (owner %q)", ErrLedgerMissing, owner)
	}
	return p.confirm(ctx, owner, t.steps)
}

// fence marks owner's ledger fenced and returns the FencedError for it.
func (p *Pool) fence(ctx context.Context, owner string, seq, top int64) error {
	l := p.ledgers[owner]
	r, err := runScript(ctx, p.c, fenceScript, []string{l.meta()})
	if err != nil {
		return fmt.Errorf("escrow: fence ledger of %q: %w", owner, err)
	}
	if r.status == "missing" {
		return fmt.Errorf("%w (owner %q)", ErrLedgerMissing, owner)
	}
	fe := &FencedError{Owner: owner, LedgerSeq: seq, WitnessSeq: top}
	p.logFenced(fe)
	return fe
}

// checkPlacement checks that no witness shares a server with its ledger: a separate Witness
// client on another server passes; the pool's own cluster client passes when the slot map
// puts every witness on another master than its ledger; a standalone client without a
// separate Witness never does. A failure is ErrSharedWitness unless AllowSharedWitness is
// set, in which case it is logged as a warning.
func (p *Pool) checkPlacement(ctx context.Context) error {
	var shared []string
	switch wc := p.w.(type) {
	case *redis.ClusterClient:
		m, err := slot.Load(ctx, wc)
		if err != nil {
			return fmt.Errorf("escrow: read the cluster's slot map: %w", err)
		}
		same := p.opts.Witness == nil || sameAddrs(p.c, p.w)
		for _, name := range p.order {
			wm := m.MasterOfKey(p.witness[name])
			if same && wm == m.MasterOfKey(p.ledgers[name].meta()) {
				shared = append(shared, fmt.Sprintf("owner %q (both on %s)", name, wm))
			}
		}
	default:
		if p.opts.Witness == nil || sameAddrs(p.c, p.w) {
			shared = append(shared, "every owner (the witness client is the ledgers' server)")
		}
	}
	if len(shared) == 0 {
		return nil
	}
	if p.opts.AllowSharedWitness {
		if p.opts.Logger != nil {
			p.opts.Logger.Warn("escrow: witnesses share a server with their ledgers; a restore of that server cannot be fenced", "owners", shared)
		}
		return nil
	}
	return fmt.Errorf("%w: %s; give PoolOptions.Witness on another server, or set AllowSharedWitness", ErrSharedWitness, strings.Join(shared, ", "))
}

// sameAddrs reports whether two clients reach the same servers (by their seed addresses).
func sameAddrs(a, b Client) bool {
	addrs := func(c Client) []string {
		switch x := c.(type) {
		case *redis.Client:
			return []string{x.Options().Addr}
		case *redis.ClusterClient:
			return x.Options().Addrs
		}
		return nil
	}
	aa, bb := addrs(a), addrs(b)
	for _, x := range aa {
		for _, y := range bb {
			if x == y {
				return true
			}
		}
	}
	return false
}
