package migrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
	"github.com/celebrity-go/celebrity/routing"
)

// item is one thing copied to the target: a record ('r') or an idempotency record ('o').
type item struct {
	kind  byte
	field string
	value string
	exp   int64 // tombstone or op-record expiry, unix ms
}

// prepare runs prepare.lua on the target in the given mode ("prepare", "reset", "abandon",
// "floor" with the floor value).
// A refusal is an abort: the target's record is open, newer, or claimed by another migration.
func (c *Coordinator) prepare(ctx context.Context, r *run, mode string, floor ...string) error {
	if r.folding() {
		return c.foldPrepare(ctx, r, mode, floor...)
	}
	b := c.shards[r.Target]
	k := routingfmt.Keys(c.keys.Tag(r.Unit))
	args := []any{u64(r.ImportGen), r.ID, mode, u64(r.epoch)}
	for _, f := range floor {
		args = append(args, f)
	}
	reply, err := prepareScript.Run(ctx, b.c, []string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log},
		args...).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: %s on target %q: %w", mode, r.Target, err)
	}
	if len(reply) >= 3 && reply[0] == "ok" {
		return nil
	}
	if len(reply) == 2 && reply[0] == "fenced" {
		return c.fenced(r, reply[1], "target "+r.Target)
	}
	if len(reply) == 4 && reply[0] == "refused" {
		return abortf(false, fmt.Errorf("%w: target %q holds %s at generation %s state %q (migration %q), cannot %s for import at %d",
			ErrOwnershipChanged, r.Target, r.Unit, reply[1], reply[2], reply[3], mode, r.ImportGen))
	}
	return fmt.Errorf("migrate: %s on target %q: malformed reply %q", mode, r.Target, reply)
}

// apply writes items to the target with apply.lua.
func (c *Coordinator) apply(ctx context.Context, r *run, items []item) (written, skipped int64, err error) {
	if len(items) == 0 {
		return 0, 0, nil
	}
	if r.splitting() {
		return c.splitApply(ctx, r, items)
	}
	if c.beforeApply != nil {
		c.beforeApply(ctx, r, items)
	}
	if r.folding() {
		return c.foldApply(ctx, r, items)
	}
	k := routingfmt.Keys(c.keys.Tag(r.Unit))
	reply, err := applyScript.Run(ctx, c.shards[r.Target].c,
		[]string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones}, applyArgs(r, items, c.o.Clock())...).StringSlice()
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: apply on target %q: %w", r.Target, err)
	}
	return c.applied(ctx, r, reply)
}

// applyArgs is the pure plan of an apply.lua call: the ARGV that writes items into r's
// target under r's import generation, ID and epoch, at now.
func applyArgs(r *run, items []item, now time.Time) []any {
	args := make([]any, 0, 4+4*len(items))
	args = append(args, u64(r.ImportGen), r.ID, ms(now), u64(r.epoch))
	for _, it := range items {
		args = append(args, string(it.kind), it.field, it.value, i64(max(it.exp, 0)))
	}
	return args
}

// applied reads apply.lua's reply to r's call: the counts written and skipped (refused),
// or the error of a conflict, a fenced call or a target that is no longer r's import.
func (c *Coordinator) applied(ctx context.Context, r *run, reply []string) (written, skipped int64, err error) {
	switch {
	case len(reply) == 3 && reply[0] == "ok":
		w, _ := strconv.ParseInt(reply[1], 10, 64)
		s, _ := strconv.ParseInt(reply[2], 10, 64)
		c.stats.refused.Add(s)
		return w, s, nil
	case len(reply) == 5 && reply[0] == "conflict":
		kind := "record"
		if reply[1] == "o" {
			kind = "op"
		}
		c.stats.conflicts.Add(1)
		return 0, 0, abortf(true, &ConflictError{Kind: kind, Field: reply[2], Stored: reply[3], Incoming: reply[4]})
	case len(reply) == 2 && reply[0] == "fenced":
		return 0, 0, c.fenced(r, reply[1], "target "+r.Target)
	case len(reply) == 4 && reply[0] == "stale":
		// The target's record is no longer this migration's import: a Cancel (or an abort
		// by another driver) abandoned it, or someone took the unit.
		s, lerr := c.load(ctx, r.ID)
		if lerr == nil && (s.State == Cancelling || s.State.Terminal()) {
			return 0, 0, &stateError{id: r.ID, found: s.State, want: []State{r.State}}
		}
		return 0, 0, abortf(true, fmt.Errorf("%w: target %q holds %s at generation %s state %q (migration %q)",
			ErrOwnershipChanged, r.Target, r.Unit, reply[1], reply[2], reply[3]))
	}
	return 0, 0, fmt.Errorf("migrate: apply on target %q: malformed reply %q", r.Target, reply)
}

// probeResult is what probe.lua read on the source.
type probeResult struct {
	own     routing.Ownership
	last    string // last generated change-log ID
	maxDel  string // largest change-log ID removed by XDEL
	added   uint64 // entries ever added to the log
	length  uint64 // entries present in the log
	entries []redis.XMessage
	mark    string // a carve-out's tenant: the carve-out that marked it moved out ("" none)
}

// probe reads the source's ownership record and log positions, and up to count entries
// after `after` up to `upto`, in one atomic script.
func (c *Coordinator) probe(ctx context.Context, r *run, after, upto string, count int) (p probeResult, err error) {
	k := c.srcKeys(r)
	args := []any{after, upto, count}
	if r.carving() {
		args = append(args, r.Unit.Tenant)
	}
	v, err := probeScript.Run(ctx, c.shards[r.Source].c, []string{k.Own, k.Log}, args...).Slice()
	if err != nil {
		return probeResult{}, fmt.Errorf("migrate: probe source %q: %w", r.Source, err)
	}
	if p, err = parseProbe(v); err != nil {
		return probeResult{}, fmt.Errorf("migrate: probe source %q: %v", r.Source, err)
	}
	return p, nil
}

// parseProbe reads probe.lua's reply v (seven values, and the carve mark as an eighth).
// It is pure.
func parseProbe(v []any) (p probeResult, err error) {
	if len(v) == 8 {
		p.mark, _ = v[7].(string)
		v = v[:7]
	}
	if len(v) != 7 {
		return probeResult{}, errors.New("malformed reply")
	}
	gen, _ := v[0].(string)
	state, _ := v[1].(string)
	p.own.Generation, _ = strconv.ParseUint(gen, 10, 64)
	p.own.State = routing.State(state)
	p.last, _ = v[2].(string)
	p.maxDel, _ = v[3].(string)
	added, _ := v[4].(string)
	length, _ := v[5].(string)
	p.added, _ = strconv.ParseUint(added, 10, 64)
	p.length, _ = strconv.ParseUint(length, 10, 64)
	raw, _ := v[6].([]any)
	if p.entries, err = parseEntries(raw); err != nil {
		return probeResult{}, err
	}
	return p, nil
}

// parseEntries reads the log entries of a probe.lua reply (each an ID and its field,
// value list). It is pure.
func parseEntries(raw []any) ([]redis.XMessage, error) {
	var out []redis.XMessage
	for _, e := range raw {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, errors.New("malformed entry")
		}
		id, _ := pair[0].(string)
		kv, _ := pair[1].([]any)
		vals := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			key, _ := kv[i].(string)
			vals[key] = kv[i+1]
		}
		out = append(out, redis.XMessage{ID: id, Values: vals})
	}
	return out, nil
}

// lost reports whether entries after the reader's position (appliedPos, which was the
// appliedN-th entry ever added) are gone from the log: removed by XDEL after it, or trimmed
// (trimming removes the oldest entries, so the entries after the position are all present
// exactly when the log still holds at least that many).
func (p probeResult) lost(appliedPos string, appliedN uint64) (bool, error) {
	if p.added > appliedN && p.length < p.added-appliedN {
		return true, nil
	}
	return idAfter(p.maxDel, appliedPos)
}

// streamID is a parsed stream entry ID.
type streamID struct{ ms, seq uint64 }

func parseID(s string) (streamID, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = "0"
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return streamID{}, fmt.Errorf("migrate: malformed stream ID %q", s)
	}
	return streamID{ms, seq}, nil
}

// idAfter reports whether stream ID a is strictly after b.
func idAfter(a, b string) (bool, error) {
	x, err := parseID(a)
	if err != nil {
		return false, err
	}
	y, err := parseID(b)
	if err != nil {
		return false, err
	}
	return x.ms > y.ms || (x.ms == y.ms && x.seq > y.seq), nil
}

// fenced returns the [*FencedError] of a step refused because a newer epoch acted.
func (c *Coordinator) fenced(r *run, current, where string) error {
	cur, _ := strconv.ParseUint(current, 10, 64)
	c.stats.fenced.Add(1)
	return &FencedError{ID: r.ID, Epoch: r.epoch, Current: cur, Where: where}
}

// transition changes the unit's ownership record on shard sh, fenced by r's epoch.
func (c *Coordinator) transition(ctx context.Context, r *run, sh *shard, from, to routing.Ownership) (string, error) {
	id, err := sh.r.TransitionFenced(ctx, r.Unit, from, to, r.epoch)
	return id, c.shardFenced(r, sh, err)
}

// openVerified moves r's unit on target sh from importing to open at `to`, only while the
// record carries the mark of r's verified copy (prepare.lua mode "ready"), checked in the
// same script as the change: a target restored to a point before the mark (whose copy may
// lack records) is never opened, even if the restore lands between a read and this call.
// errNotVerified describes that refusal; other errors are as transition's.
func (c *Coordinator) openVerified(ctx context.Context, r *run, sh *shard, to routing.Ownership) error {
	imp := routing.Ownership{Generation: r.ImportGen, State: routing.StateImporting}
	_, err := sh.r.TransitionFencedIfReady(ctx, r.Unit, imp, to, r.epoch, r.ID)
	if err = c.shardFenced(r, sh, err); errors.Is(err, routing.ErrNotReady) {
		return fmt.Errorf("%w: target %q holds %s importing without the mark of its verified copy (restored to an earlier point?)",
			errNotVerified, r.Target, r.Unit)
	}
	return err
}

// errNotVerified: the target lacks the mark of the migration's verified copy.
var errNotVerified = fmt.Errorf("%w: target not verified", ErrOwnershipChanged)

// shardFenced turns a routing.FencedError of a transition on sh into the migration's
// fenced error (and counts it); other errors pass through.
func (c *Coordinator) shardFenced(r *run, sh *shard, err error) error {
	var fe *routing.FencedError
	if errors.As(err, &fe) {
		return c.fenced(r, u64(fe.Fence), "shard "+sh.name)
	}
	return err
}
