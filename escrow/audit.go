package escrow

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AuditReport describes where every permit is. A clean report has every permit 1..Capacity
// in exactly one place (free at one owner, held by one job, or in one pending transfer), so
// Free+Held+InTransfer equals Capacity and Held can never exceed it.
type AuditReport struct {
	// Capacity is the configured number of permits.
	Capacity int
	// Free, Held and InTransfer count the permits found in exactly one place of each kind.
	Free, Held, InTransfer int
	// Lapsed counts the held permits whose lease had ended more than LeaseSkew before the
	// read, by the ledger server's clock: they are still counted in Held, and the next
	// take-back at their owner (Acquire, Renew, Freeze, Sweep) frees them.
	Lapsed int
	// Owners describes each ledger.
	Owners []OwnerAudit
	// Duplicated lists permits found in more than one place.
	Duplicated []PermitPlaces
	// Missing lists permits found nowhere.
	Missing []int
	// Pending lists transfers frozen at the source and not yet completed or aborted.
	Pending []PendingTransfer
	// Problems lists other inconsistencies in words (fenced or missing ledgers, a job and a
	// permit that do not point at each other, permit numbers out of range).
	Problems []string
}

// OwnerAudit describes one ledger.
type OwnerAudit struct {
	Owner                string
	Exists, Fenced       bool
	Seq, Witness         int64
	Free, Held, Frozen   int
	TransfersIn, OutRecs int
	// Lapsed counts the held permits whose lease had ended more than LeaseSkew before the
	// read (see AuditReport.Lapsed).
	Lapsed int
}

// PermitPlaces names every place a duplicated permit was found.
type PermitPlaces struct {
	Permit int
	Places []string
}

// PendingTransfer is a transfer frozen at its source and not yet settled there.
type PendingTransfer struct {
	ID, From, To string
	Permits      []int
	// Accepted reports that the target has accepted it (only the completion is missing).
	Accepted bool
}

// Clean reports whether every permit is in exactly one place and no ledger is fenced.
func (r AuditReport) Clean() bool {
	return len(r.Duplicated) == 0 && len(r.Missing) == 0 && len(r.Problems) == 0 &&
		r.Free+r.Held+r.InTransfer == r.Capacity
}

// String summarises the report on one line.
func (r AuditReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity=%d free=%d held=%d in-transfer=%d pending=%d", r.Capacity, r.Free, r.Held, r.InTransfer, len(r.Pending))
	if r.Lapsed > 0 {
		fmt.Fprintf(&b, " lapsed=%d", r.Lapsed)
	}
	if len(r.Duplicated) > 0 {
		fmt.Fprintf(&b, " duplicated=%v", r.Duplicated)
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, " missing=%v", r.Missing)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(&b, " problems=%q", r.Problems)
	}
	return b.String()
}

// transferRecord is the JSON stored in the out and in hashes of a ledger.
type transferRecord struct {
	S    string     `json:"s"`
	To   string     `json:"to,omitempty"`
	From string     `json:"from,omitempty"`
	K    int        `json:"k,omitempty"`
	Seq  int64      `json:"seq,omitempty"`
	P    permitList `json:"p,omitempty"`
}

// permitList decodes a JSON list of permits; Lua's cjson encodes an empty list as {}.
type permitList []int

// UnmarshalJSON accepts a list of numbers, or {} for an empty list.
func (l *permitList) UnmarshalJSON(b []byte) error {
	if string(b) == "{}" {
		*l = permitList{}
		return nil
	}
	return json.Unmarshal(b, (*[]int)(l))
}

// ledgerSnapshot is one ledger read atomically by snapshot.lua.
type ledgerSnapshot struct {
	owner   string
	exists  bool
	fenced  bool
	seq     int64
	witness int64
	free    []int
	held    map[int]string
	jobs    map[string]string
	out     map[string]transferRecord
	in      map[string]transferRecord // by inKey(source, T)
	leases  map[string]int64          // job -> lease expiry in server milliseconds
	now     int64                     // the server's clock at the read, in milliseconds
}

// lapsed reports whether job's lease had ended more than skew before the read (the same
// test as lapsed_before in step.lua).
func (s ledgerSnapshot) lapsed(job string, skew time.Duration) bool {
	ms, ok := s.leases[job]
	return ok && ms < s.now-skew.Milliseconds()
}

// inKey is the field of the in hash that holds the target's answer about transfer id from
// source: transfer IDs are unique per source only. It is in_key of step.lua.
func inKey(source, id string) string {
	return strconv.Itoa(len(source)) + ":" + source + ":" + id
}

// snapshot runs snapshot.lua on l. The script writes nothing, but it is sent as EVALSHA, not
// EVALSHA_RO: it reads the server's clock (TIME, to tell lapsed leases), which some servers
// that speak the protocol refuse in a read-only script (miniredis, the examples' embedded
// default), and escrow never reads from replicas anyway.
func (l ledger) snapshot(ctx context.Context, c Client) (ledgerSnapshot, error) {
	res, err := snapshotScript.Run(ctx, c, l.keys).Slice()
	if err != nil {
		return ledgerSnapshot{}, fmt.Errorf("escrow: snapshot %q: %w", l.owner, err)
	}
	return l.parseSnapshot(res)
}

func (l ledger) parseSnapshot(res []any) (ledgerSnapshot, error) {
	if len(res) != 10 {
		return ledgerSnapshot{}, fmt.Errorf("escrow: snapshot %q: unexpected reply", l.owner)
	}
	s := ledgerSnapshot{owner: l.owner, exists: toInt(res[0]) == 1, seq: toInt(res[1]), fenced: toInt(res[2]) == 1,
		held: map[int]string{}, jobs: map[string]string{}, out: map[string]transferRecord{}, in: map[string]transferRecord{}}
	for _, v := range list(res[3]) {
		s.free = append(s.free, int(toInt(v)))
	}
	pairs(res[4], func(k, v string) { p, _ := strconv.Atoi(k); s.held[p] = v })
	pairs(res[5], func(k, v string) { s.jobs[k] = v })
	s.leases = map[string]int64{}
	pairs(res[8], func(k, v string) { n, _ := strconv.ParseInt(v, 10, 64); s.leases[k] = n })
	s.now = toInt(res[9])
	for i, m := range []map[string]transferRecord{s.out, s.in} {
		var perr error
		pairs(res[6+i], func(k, v string) {
			var r transferRecord
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				perr = err
			}
			m[k] = r
		})
		if perr != nil {
			return ledgerSnapshot{}, fmt.Errorf("escrow: snapshot %q: bad transfer record: %w", l.owner, perr)
		}
	}
	return s, nil
}

func list(v any) []any { x, _ := v.([]any); return x }

func pairs(v any, fn func(k, v string)) {
	xs := list(v)
	for i := 0; i+1 < len(xs); i += 2 {
		k, _ := xs[i].(string)
		val, _ := xs[i+1].(string)
		fn(k, val)
	}
}

// buildReport places every permit found in the snapshots. A transfer frozen at its source
// and accepted by its target counts at the target only. witnessed maps each owner to the top
// of its witness chain (nil for a Central limiter, which has no witness); skew is the lease
// skew margin.
func buildReport(capacity int, snaps []ledgerSnapshot, witnessed map[string]int64, skew time.Duration) AuditReport {
	a := auditor{r: AuditReport{Capacity: capacity}, skew: skew, places: map[int][]string{}, kinds: map[int]int{},
		byOwner: make(map[string]*ledgerSnapshot, len(snaps))}
	for i := range snaps {
		a.byOwner[snaps[i].owner] = &snaps[i]
	}
	for _, s := range snaps {
		a.place(s, witnessed)
	}
	a.tally()
	sort.Slice(a.r.Pending, func(i, j int) bool { return a.r.Pending[i].ID < a.r.Pending[j].ID })
	sort.Strings(a.r.Problems)
	return a.r
}

// auditor collects the places of every permit while buildReport reads the ledgers.
type auditor struct {
	r       AuditReport
	skew    time.Duration
	byOwner map[string]*ledgerSnapshot
	places  map[int][]string
	kinds   map[int]int // 0 free, 1 held, 2 transfer (meaningful when placed once)
}

// put records that permit p is at where, of kind.
func (a *auditor) put(p int, kind int, where string) {
	if p < 1 || p > a.r.Capacity {
		a.r.Problems = append(a.r.Problems, fmt.Sprintf("permit %d out of range at %s", p, where))
		return
	}
	a.places[p] = append(a.places[p], where)
	a.kinds[p] = kind
}

// place records every permit of ledger s, and its problems.
func (a *auditor) place(s ledgerSnapshot, witnessed map[string]int64) {
	oa := OwnerAudit{Owner: s.owner, Exists: s.exists, Fenced: s.fenced, Seq: s.seq, Witness: witnessed[s.owner],
		Free: len(s.free), Held: len(s.held), TransfersIn: len(s.in), OutRecs: len(s.out)}
	if !s.exists {
		a.r.Problems = append(a.r.Problems, fmt.Sprintf("ledger %q is missing", s.owner))
	}
	if s.fenced || (witnessed != nil && s.seq < witnessed[s.owner]) {
		a.r.Problems = append(a.r.Problems, fmt.Sprintf("ledger %q is fenced (seq %d, witness %d)", s.owner, s.seq, witnessed[s.owner]))
	}
	for _, p := range s.free {
		a.put(p, 0, "free@"+s.owner)
	}
	for p, job := range s.held {
		a.put(p, 1, "held@"+s.owner+":"+job)
		if s.lapsed(job, a.skew) {
			oa.Lapsed++
			a.r.Lapsed++
		}
		if rec, ok := s.jobs[job]; !ok || !strings.HasPrefix(rec, strconv.Itoa(p)+":") {
			a.r.Problems = append(a.r.Problems, fmt.Sprintf("ledger %q: permit %d held by %q, job record %q", s.owner, p, job, rec))
		}
	}
	if len(s.jobs) != len(s.held) {
		a.r.Problems = append(a.r.Problems, fmt.Sprintf("ledger %q: %d jobs but %d held permits", s.owner, len(s.jobs), len(s.held)))
	}
	oa.Frozen = a.placeOutgoing(s)
	a.r.Owners = append(a.r.Owners, oa)
}

// placeOutgoing records the transfers frozen at s as pending, and their permits as in
// transfer unless the target has accepted them. It returns the number of frozen permits.
func (a *auditor) placeOutgoing(s ledgerSnapshot) int {
	frozen := 0
	for id, rec := range s.out {
		if rec.S != "frozen" {
			continue
		}
		frozen += len(rec.P)
		pt := PendingTransfer{ID: id, From: s.owner, To: rec.To, Permits: rec.P}
		if tgt, ok := a.byOwner[rec.To]; ok && tgt.in[inKey(s.owner, id)].S == "accepted" {
			pt.Accepted = true
		} else {
			for _, p := range rec.P {
				a.put(p, 2, "transfer "+id+" "+s.owner+"->"+rec.To)
			}
		}
		a.r.Pending = append(a.r.Pending, pt)
	}
	return frozen
}

// tally counts each permit placed once by kind, and lists those placed nowhere or twice.
func (a *auditor) tally() {
	for p := 1; p <= a.r.Capacity; p++ {
		switch len(a.places[p]) {
		case 0:
			a.r.Missing = append(a.r.Missing, p)
		case 1:
			switch a.kinds[p] {
			case 0:
				a.r.Free++
			case 1:
				a.r.Held++
			case 2:
				a.r.InTransfer++
			}
		default:
			a.r.Duplicated = append(a.r.Duplicated, PermitPlaces{Permit: p, Places: a.places[p]})
		}
	}
}
