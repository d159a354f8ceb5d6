package escrow

import (
	"errors"
	"fmt"
)

// Sentinel errors returned (wrapped) by the package. Use errors.Is to branch on them.
var (
	// ErrExhausted reports that no free permit is left where the acquire ran.
	ErrExhausted = errors.New("escrow: no free permit")
	// ErrFenced reports that a ledger is behind its witness (restored from an old copy, or an
	// acknowledged write was lost on failover) or has been marked fenced. It refuses every
	// change until Pool.Reconcile runs.
	ErrFenced = errors.New("escrow: ledger is behind its witness (fenced)")
	// ErrLedgerMissing reports that the ledger keys do not exist: never initialised, or deleted
	// (eviction, FLUSHALL). The package never re-creates a ledger that has been witnessed.
	ErrLedgerMissing = errors.New("escrow: ledger keys are missing")
	// ErrInsufficient reports a transfer of more permits than the source has free.
	ErrInsufficient = errors.New("escrow: not enough free permits for the transfer")
	// ErrUnknownOwner reports an owner name that is not part of the pool.
	ErrUnknownOwner = errors.New("escrow: unknown owner")
	// ErrInvalid reports bad input or bad options (empty, huge or non-UTF-8 IDs and names,
	// names with '{', '}' or ':', k out of range, a transfer to itself). The message names
	// the field and the allowed range; nothing is changed.
	ErrInvalid = errors.New("escrow: invalid argument")
	// ErrConflict reports that an ID is reused for a different operation (a transfer ID with
	// other parameters, or permits that already exist at the target).
	ErrConflict = errors.New("escrow: conflicting reuse of an ID")
	// ErrUnknownTransfer reports a transfer ID the source has no record of.
	ErrUnknownTransfer = errors.New("escrow: unknown transfer")
	// ErrRefused reports that the target has durably refused the transfer; the source can
	// abort it and keep its permits.
	ErrRefused = errors.New("escrow: transfer refused by the target")
	// ErrAborted reports that the transfer was already aborted at the source.
	ErrAborted = errors.New("escrow: transfer was aborted")
	// ErrWeakDurability reports a server that does not keep every acknowledged write
	// (appendonly yes with appendfsync always), or whose settings Init cannot read (CONFIG GET
	// refused). Init returns it unless AllowWeakDurability is set.
	ErrWeakDurability = errors.New("escrow: server may lose acknowledged writes")
	// ErrSharedWitness reports a witness on the same server (or cluster master) as the ledger
	// it watches: a restore or failover of that server rolls both back together, and fencing
	// cannot see it. Pool.Init returns it unless PoolOptions.AllowSharedWitness is set.
	ErrSharedWitness = errors.New("escrow: witness shares a server with its ledger")
	// ErrUnsafeEviction reports a maxmemory-policy that may evict ledger keys.
	ErrUnsafeEviction = errors.New("escrow: maxmemory-policy may evict ledger keys")
	// ErrNotHeld reports a Release or Renew of a job that holds no permit at that owner:
	// released already (for Renew; a replayed Release reports success again, within the
	// last 1024 releases of the ledger), taken back after its lease (a Renew whose lease ended more than LeaseSkew ago takes it
	// back itself), granted by another owner, or never granted.
	ErrNotHeld = errors.New("escrow: the job holds no permit here")
	// ErrUnconfirmed reports a step that ran on the ledger but that the witness could not
	// confirm (the ledger's log no longer shows it, or the witness lags too far behind). The
	// step is not acknowledged: retry the call, or undo it (Release a job that may hold a
	// permit).
	ErrUnconfirmed = errors.New("escrow: the witness could not confirm the step")
	// ErrLayoutMismatch reports a ledger initialised earlier with other permits than the
	// options now describe.
	ErrLayoutMismatch = errors.New("escrow: stored ledger does not match the options")
	// ErrPreviousPrefix reports a limit that Init, Pool.Reconcile or Central.RestoreLost
	// would create under DefaultPrefix while its ledgers or witnesses exist under
	// PreviousDefaultPrefix (see [PreviousDefaultPrefix]). Acquire, Release and Renew
	// under DefaultPrefix join it to ErrLedgerMissing when the ledger is missing there but
	// the limit exists under PreviousDefaultPrefix (a process that skipped Init).
	ErrPreviousPrefix = errors.New("escrow: the limit exists under the previous default prefix")
)

// FencedError is returned (wrapping ErrFenced) when a ledger is found behind its witness.
type FencedError struct {
	// Owner is the owner whose ledger is fenced ("" for a Central limiter).
	Owner string
	// LedgerSeq is the sequence stored in the ledger.
	LedgerSeq int64
	// WitnessSeq is the sequence recorded by the witness (0 if not known).
	WitnessSeq int64
}

// Error implements error.
func (e *FencedError) Error() string {
	return fmt.Sprintf("escrow: ledger of owner %q is fenced (ledger seq %d, witness seq %d)",
		e.Owner, e.LedgerSeq, e.WitnessSeq)
}

// Is makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
