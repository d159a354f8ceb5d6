package escrow

import (
	"context"
	"errors"
	"sort"
)

// RecoverReport lists what Recover did with each pending transfer.
type RecoverReport struct {
	// Completed and Aborted list the transfer IDs settled by this call.
	Completed, Aborted []string
	// Pending maps the transfer IDs that could not be settled to the reason (for example a
	// fenced target: its answer about T cannot be trusted until Reconcile).
	Pending map[string]error
}

// Recover finishes or aborts every transfer frozen at any source. For each one it asks the
// target by delivering T (idempotent): accepted means the source completes T; a durable
// refusal means the source aborts T. It never decides by elapsed time. Any process may run it,
// at any time, concurrently with transfers: every step is idempotent by transfer ID.
func (p *Pool) Recover(ctx context.Context) (RecoverReport, error) {
	rep := RecoverReport{Pending: map[string]error{}}
	for _, name := range p.order {
		if err := p.recoverFrom(ctx, name, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// recoverFrom settles the transfers frozen at the source name and records the outcome of each
// in rep. It returns an error only when the source cannot be read or ctx ended.
func (p *Pool) recoverFrom(ctx context.Context, name string, rep *RecoverReport) error {
	snap, err := p.ledgers[name].snapshot(ctx, p.c)
	if err != nil {
		return err
	}
	ids := frozenIDs(snap)
	if len(ids) > 0 {
		// The freezes may not be confirmed yet (their process died before the witness
		// step). Recover acts on them, so it has them confirmed first: a source that loses
		// them is then fenced instead of granting permits the target has too.
		if err := p.confirmCurrent(ctx, name); err != nil {
			for _, id := range ids {
				rep.Pending[id] = err
			}
			return nil
		}
	}
	for _, id := range ids {
		rec := snap.out[id]
		f := Frozen{ID: id, From: name, To: rec.To, Permits: rec.P, Seq: rec.Seq, State: rec.S}
		err := p.resolve(ctx, f)
		switch {
		case err == nil:
			rep.Completed = append(rep.Completed, id)
		case errors.Is(err, ErrRefused):
			rep.Aborted = append(rep.Aborted, id)
		case ctx.Err() != nil:
			return err
		default:
			rep.Pending[id] = err
		}
	}
	return nil
}

// frozenIDs lists, sorted, the transfers the ledger read in snap has frozen and not settled.
func frozenIDs(snap ledgerSnapshot) []string {
	ids := make([]string, 0, len(snap.out))
	for id, rec := range snap.out {
		if rec.S == "frozen" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
