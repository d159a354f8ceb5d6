package escrow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// Grant is one permit granted to a job.
type Grant struct {
	// Owner is the owner that granted the permit ("" for a Central limiter).
	Owner string
	// Permit is the permit number, 1..capacity.
	Permit int
	// Token is the fencing token of the grant. Tokens for one permit only grow, also when the
	// permit moves between owners, so a downstream system that remembers the highest token it
	// saw per permit can reject a stale holder.
	Token int64
	// Replayed reports that the job already held this permit (a retry of the same acquire).
	Replayed bool
	// Expires is when the grant's lease ends by the caller's clock (Options.Clock): the
	// caller's clock read before the request was sent, plus the lease (a new grant) or plus
	// the time the ledger had left on the lease when the script ran (a replay). It is never
	// later than the ledger's own end of the lease, whatever the offset between the caller's
	// and the server's clocks (only a difference in their rates, which LeaseSkew covers, can
	// move it); zero without a lease. A replay of a lease that has ended has Expires in the
	// past. The holder must Renew before it, or stop working on the permit.
	Expires time.Time
}

// Holder is one job holding a permit, as Holders reports it.
type Holder struct {
	// Job is the job ID.
	Job string
	// Permit and Token are the job's grant.
	Permit int
	Token  int64
	// Expires is when the lease ends by the ledger server's clock (zero without a lease); the
	// permit is taken back after Expires plus the skew margin.
	Expires time.Time
	// Expired reports that the lease had ended by the ledger server's clock when Holders
	// read the ledger.
	Expired bool
	// Lapsed reports that the lease had ended more than LeaseSkew before the read: the
	// permit is no longer the job's, and the next take-back at its owner (Acquire, Renew,
	// Freeze, Sweep) frees it.
	Lapsed bool
}

// ledger addresses the nine keys of one ledger. They share one hash tag, so every script
// that touches a ledger touches one slot.
type ledger struct {
	owner       string
	keys        []string
	first, last int
	capacity    int
}

// meta and log return the ledger's meta hash and step log, keys 1 and 7 of step.lua.
func (l ledger) meta() string { return l.keys[0] }
func (l ledger) log() string  { return l.keys[6] }

// newLedger returns owner's ledger under prefix, hash tag tag, holding permits first..last
// of capacity.
func newLedger(prefix, tag, owner string, first, last, capacity int) ledger {
	base := slot.Tagged(prefix, tag) + ":"
	return ledger{
		owner:    owner,
		keys:     []string{base + "meta", base + "free", base + "jobs", base + "held", base + "out", base + "in", base + "log", base + "leases", base + "released"},
		first:    first,
		last:     last,
		capacity: capacity,
	}
}

// reply is a decoded script reply: a status word followed by values.
type reply struct {
	status string
	vals   []any
}

func (r reply) int(i int) int64 {
	if i >= len(r.vals) {
		return 0
	}
	return toInt(r.vals[i])
}

func (r reply) str(i int) string {
	if i >= len(r.vals) {
		return ""
	}
	s, _ := r.vals[i].(string)
	return s
}

// step is one entry of a ledger's log: the sequence after the step and the step's ID, which
// commits to every step before it (see step.lua).
type step struct {
	seq int64
	id  string
}

// seg decodes the segment of steps at position i of a reply ({seq, id, ...}).
func (r reply) seg(i int) []step {
	if i >= len(r.vals) {
		return nil
	}
	return parseSteps(r.vals[i])
}

func parseSteps(v any) []step {
	xs, _ := v.([]any)
	out := make([]step, 0, len(xs)/2)
	for i := 0; i+1 < len(xs); i += 2 {
		id, _ := xs[i+1].(string)
		out = append(out, step{seq: toInt(xs[i]), id: id})
	}
	return out
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// runScript runs s and decodes its reply. A script refuses a bad argument with an error
// "ERR escrow: <what>" before any write; runScript returns it wrapping ErrInvalid.
func runScript(ctx context.Context, c redis.Scripter, s *script.Script, keys []string, args ...any) (reply, error) {
	res, err := s.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return reply{}, scriptError(err)
	}
	if len(res) == 0 {
		return reply{}, fmt.Errorf("escrow: empty script reply")
	}
	st, ok := res[0].(string)
	if !ok {
		return reply{}, fmt.Errorf("escrow: unexpected script reply %v", res)
	}
	return reply{status: st, vals: res[1:]}, nil
}

// scriptError ties a script's refusal of a bad argument to ErrInvalid, and returns any other
// error as it is.
func scriptError(err error) error {
	var re redis.Error
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "ERR escrow: ") {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(re.Error(), "ERR escrow: "))
	}
	return err
}

// common maps the statuses every ledger script may return to errors.
func (l ledger) common(r reply, witness int64) error {
	switch r.status {
	case "fenced":
		return &FencedError{Owner: l.owner, LedgerSeq: r.int(0), WitnessSeq: witness}
	case "missing":
		return fmt.Errorf("%w (owner %q)", ErrLedgerMissing, l.owner)
	}
	return nil
}

// init creates the ledger unless it exists. It returns the ledger's last steps, which the
// caller has the witness confirm.
func (l ledger) init(ctx context.Context, c redis.Scripter, witness int64) (created bool, seg []step, err error) {
	return l.initAt(ctx, c, witness, 1)
}

// initAt is init with the sequence the new ledger starts at.
func (l ledger) initAt(ctx context.Context, c redis.Scripter, witness, start int64) (created bool, seg []step, err error) {
	created, seg, _, _, err = l.initCID(ctx, c, witness, start, "")
	return created, seg, err
}

// initCID is initAt for a Central: a ledger it creates is pending under creation ID cid until
// activated. It also returns the ledger's creation ID and whether it is pending.
func (l ledger) initCID(ctx context.Context, c redis.Scripter, witness, start int64, cid string) (created bool, seg []step, ledgerCID string, pending bool, err error) {
	created, seg, r, err := l.runInit(ctx, c, witness, start, cid)
	if err != nil {
		return false, nil, "", false, err
	}
	if created {
		return true, seg, cid, cid != "", nil
	}
	return false, seg, r.str(4), r.int(5) == 1, nil
}

func (l ledger) runInit(ctx context.Context, c redis.Scripter, witness, start int64, cid string) (created bool, seg []step, rep reply, err error) {
	r, err := runScript(ctx, c, initScript, l.keys, l.first, l.last, l.capacity, witness, start, cid)
	if err != nil {
		return false, nil, reply{}, fmt.Errorf("escrow: init ledger %q: %w", l.owner, err)
	}
	switch r.status {
	case "created":
		return true, r.seg(1), r, nil
	case "exists":
		if int(r.int(0)) != l.first || int(r.int(1)) != l.last || int(r.int(2)) != l.capacity {
			return false, nil, r, fmt.Errorf("%w: ledger %q was created with permits %d..%d of %d, options say %d..%d of %d",
				ErrLayoutMismatch, l.owner, r.int(0), r.int(1), r.int(2), l.first, l.last, l.capacity)
		}
		return false, r.seg(3), r, nil
	}
	if err := l.common(r, witness); err != nil {
		return false, nil, r, err
	}
	return false, nil, r, fmt.Errorf("escrow: init ledger %q: unexpected reply %q", l.owner, r.status)
}

// acquire runs the acquire script. On success it also returns the ledger's last steps, which
// a Pool has the witness confirm before it acknowledges the grant.
func (l ledger) acquire(ctx context.Context, c redis.Scripter, stats *counters, clock func() time.Time, job string, witness int64, lease, skew time.Duration, logged bool) (Grant, []step, error) {
	if err := checkID("job ID", job); err != nil {
		return Grant{}, nil, err
	}
	start := clock()
	logFlag := 0
	if logged {
		logFlag = 1
	}
	r, err := runScript(ctx, c, acquireScript, l.keys, job, witness, lease.Milliseconds(), skew.Milliseconds(), logFlag)
	if err != nil {
		return Grant{}, nil, fmt.Errorf("escrow: acquire %q: %w", job, err)
	}
	switch r.status {
	case "ok":
		stats.reclaimed.Add(uint64(r.int(6)))
		g := Grant{Owner: l.owner, Permit: int(r.int(0)), Token: r.int(1), Replayed: r.str(2) == "dup"}
		if r.int(5) == 1 {
			// The lease left when the script ran (the ledger's expiry less its now), counted
			// from this caller's clock before the request: never later than the ledger's end,
			// whatever the offset between the clocks. A new grant has the whole lease.
			g.Expires = start.Add(time.Duration(r.int(4)) * time.Microsecond)
		}
		return g, r.seg(3), nil
	case "exhausted":
		stats.reclaimed.Add(uint64(r.int(1)))
		return Grant{}, nil, fmt.Errorf("%w (owner %q, job %q)", ErrExhausted, l.owner, job)
	}
	if err := l.common(r, witness); err != nil {
		return Grant{}, nil, err
	}
	return Grant{}, nil, fmt.Errorf("escrow: acquire: unexpected reply %q", r.status)
}

// renew extends job's lease; it returns the new expiry by the caller's clock and the
// ledger's last steps right after the renewal (for the witness to confirm).
func (l ledger) renew(ctx context.Context, c redis.Scripter, stats *counters, clock func() time.Time, job string, lease, skew time.Duration) (time.Time, []step, error) {
	if err := checkID("job ID", job); err != nil {
		return time.Time{}, nil, err
	}
	if lease <= 0 {
		return time.Time{}, nil, fmt.Errorf("%w: Renew needs a lease: Lease must be > 0 in the options", ErrInvalid)
	}
	start := clock()
	r, err := runScript(ctx, c, renewScript, l.keys, job, lease.Milliseconds(), skew.Milliseconds())
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("escrow: renew %q: %w", job, err)
	}
	switch r.status {
	case "ok":
		return start.Add(lease), r.seg(1), nil
	case "none":
		stats.reclaimed.Add(uint64(r.int(1)))
		return time.Time{}, nil, fmt.Errorf("%w (owner %q, job %q)", ErrNotHeld, l.owner, job)
	}
	if err := l.common(r, 0); err != nil {
		return time.Time{}, nil, err
	}
	return time.Time{}, nil, fmt.Errorf("escrow: renew: unexpected reply %q", r.status)
}

// holders lists the jobs of a snapshot, by permit, marking the leases that had ended, and
// those that had ended more than skew before, by the server's clock at the read.
func (s ledgerSnapshot) holders(skew time.Duration) []Holder {
	out := make([]Holder, 0, len(s.jobs))
	for job, rec := range s.jobs {
		h := Holder{Job: job, Token: jobToken(rec)}
		if i := strings.IndexByte(rec, ':'); i > 0 {
			h.Permit, _ = strconv.Atoi(rec[:i])
		}
		if ms, ok := s.leases[job]; ok {
			h.Expires = time.UnixMilli(ms)
			h.Expired = ms < s.now
			h.Lapsed = s.lapsed(job, skew)
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Permit < out[j].Permit })
	return out
}

// release frees job's permit. It reports whether this run freed it; a replay of an earlier
// release of job (found in the ledger's released record) returns false and no error.
func (l ledger) release(ctx context.Context, c redis.Scripter, job string) (bool, error) {
	if err := checkID("job ID", job); err != nil {
		return false, err
	}
	r, err := runScript(ctx, c, releaseScript, l.keys, job)
	if err != nil {
		return false, fmt.Errorf("escrow: release %q: %w", job, err)
	}
	switch r.status {
	case "ok":
		return true, nil
	case "dup":
		return false, nil
	case "none":
		return false, fmt.Errorf("%w (owner %q, job %q)", ErrNotHeld, l.owner, job)
	}
	if err := l.common(r, 0); err != nil {
		return false, err
	}
	return false, fmt.Errorf("escrow: release: unexpected reply %q", r.status)
}

// sweepBatch is the most permits one run of sweep.lua takes back.
const sweepBatch = 1024

// sweep takes back every permit of the ledger whose lease ended more than skew ago by the
// server's clock, in runs of sweep.lua of at most sweepBatch permits, and returns how many.
func (l ledger) sweep(ctx context.Context, c redis.Scripter, stats *counters, skew time.Duration) (int, error) {
	total := 0
	for {
		r, err := runScript(ctx, c, sweepScript, l.keys, skew.Milliseconds(), sweepBatch)
		if err != nil {
			return total, fmt.Errorf("escrow: sweep %q: %w", l.owner, err)
		}
		if r.status != "ok" {
			if err := l.common(r, 0); err != nil {
				return total, err
			}
			return total, fmt.Errorf("escrow: sweep: unexpected reply %q", r.status)
		}
		n := int(r.int(0))
		total += n
		stats.reclaimed.Add(uint64(n))
		if r.int(1) == 0 {
			return total, nil
		}
	}
}
