package replicas

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/script"
)

// Set stores value under key with the host's version, for ttl (0 means
// Options.DefaultTTL; a negative ttl is an error).
//
// The primary record is written first, with set-if-newer: if it holds a newer version, or
// held one that expired less than its last copy registration ago, nothing is written and Set
// returns ErrStaleVersion; if it holds this version with other content, nothing is written
// and Set returns ErrConflict (the same content again is a no-op returning nil); if that
// write fails, nothing else is written and Set returns its error (retry with the same
// version: a write that did apply is recognised and completed). Then every copy registered
// at the primary (this instance's copies when the key is hot here, and those of other
// instances) is written, pipelined per node, each with set-if-newer, its value ending with
// the primary's (shortened by a random jitter) and its key never outliving its registration:
// both ends are absolute times fixed at the primary, so a copy write delayed in flight cannot
// stretch them. If some copies fail, Set returns a *PartialWriteError naming them; the
// copies not named hold this version or a newer one. With Options.WaitReplicas, an
// unacknowledged write adds an error wrapping ErrNotReplicated.
func (r *Replicator) Set(ctx context.Context, key string, value []byte, version uint64, ttl time.Duration) error {
	if key == "" {
		return errEmptyKey
	}
	ttl, err := r.checkTTL(ttl)
	if err != nil {
		return err
	}
	return r.write(ctx, key, record{version: version, data: string(value)}, ttl)
}

// Delete removes key and its copies by writing a tombstone of version to each, kept for
// Options.TombstoneTTL (and at the primary as long as copies registered there may live):
// until then any Set or fill of this version or older is refused, so a late write cannot
// resurrect the value. A value stored with this same version is ErrConflict: a delete needs
// a version of its own. Other errors are as for Set.
func (r *Replicator) Delete(ctx context.Context, key string, version uint64) error {
	if key == "" {
		return errEmptyKey
	}
	return r.write(ctx, key, record{version: version, tombstone: true}, r.opts.TombstoneTTL)
}

// target is one copy to write.
type target struct {
	index  int    // position in this instance's layout, or ForeignIndex
	key    string // physical key
	expiry int64  // when the copy's value ends, server ms
	until  int64  // when its registration ends, server ms
}

func kindOf(rec record) string {
	if rec.tombstone {
		return kindTombstone
	}
	return kindValue
}

// write runs set.lua on the primary record, then copy.lua on the copies its registry lists.
func (r *Replicator) write(ctx context.Context, key string, rec record, ttl time.Duration) error {
	var lay *layout
	if r.IsHot(key) {
		// Without a layout (slot map unreadable) the write still reaches every registered copy.
		lay, _ = r.layoutFor(ctx, key)
	}
	add := ""
	if lay != nil {
		add = lay.add
	}
	status, stored, waitErr, err := r.setPrimary(ctx, key, rec, ttl, add, "", false)
	if err != nil {
		return fmt.Errorf("replicas: write %q: %w", key, err)
	}
	switch status {
	case setStale:
		r.stats.staleWrites.Add(1)
		return fmt.Errorf("replicas: write %q version %d: %w", key, rec.version, ErrStaleVersion)
	case setConflict:
		r.stats.conflicts.Add(1)
		what := "a value"
		if stored.tombstone {
			what = "a tombstone"
		}
		return fmt.Errorf("replicas: write %q version %d: %s of that version is stored: %w", key, rec.version, what, ErrConflict)
	}
	err = r.writeCopies(ctx, key, stored, r.targets(key, stored, lay), 1)
	if waitErr != nil {
		err = errors.Join(fmt.Errorf("replicas: write %q: %w", key, waitErr), err)
	}
	return err
}

// setPrimary runs set.lua on key's primary record (as a fill of the lease held with token
// when token is not empty; keep says a lease held in the primary was taken with the value's
// life ttl, see Replicator.leaseLife) and returns its status and the record stored after it (with
// stored.none set when the key holds no record, as after a refused fill). waitErr
// reports a WAIT the replicas did not satisfy.
func (r *Replicator) setPrimary(ctx context.Context, key string, rec record, ttl time.Duration, add, token string, keep bool) (status string, stored record, waitErr, err error) {
	side, wake := r.leaseKeys(key)
	keys := []string{r.primaryKey(key), wake}
	args := []any{strconv.FormatUint(rec.version, 10), kindOf(rec), rec.data, ttl.Milliseconds(), add}
	if token != "" {
		keys = append(keys, side)
		keepArg := "0"
		if keep {
			keepArg = "1"
		}
		args = append(args, token, max(r.opts.LeaseTTL, time.Second).Milliseconds(), r.opts.NegativeTTL.Milliseconds(), keepArg)
	}
	res, waitErr, err := r.run(ctx, setScript, keys, args...)
	if err != nil {
		return "", stored, nil, err
	}
	reply, _ := res.([]any)
	if len(reply) != 2 {
		return "", stored, nil, fmt.Errorf("unexpected reply %v", res)
	}
	status, _ = reply[0].(string)
	raw, _ := reply[1].(string)
	stored.none = raw == ""
	if raw != "" {
		var ok bool
		if stored, ok = decode(raw); !ok {
			return "", stored, nil, ErrCorrupt
		}
	}
	return status, stored, waitErr, nil
}

// run runs script on keys, with a WAIT on the same connection when Options.WaitReplicas is
// set. waitErr wraps ErrNotReplicated when fewer replicas acknowledged the write.
func (r *Replicator) run(ctx context.Context, s *script.Script, keys []string, args ...any) (res any, waitErr, err error) {
	if r.opts.WaitReplicas == 0 {
		res, err = s.Run(ctx, r.client, keys, args...).Result()
		return res, nil, err
	}
	node, err := r.nodeFor(ctx, keys[0])
	if err != nil {
		return nil, nil, err
	}
	cmds, wait := script.PipelineWait(ctx, node, []script.Call{{Script: s, Keys: keys, Args: args}}, r.opts.WaitReplicas, r.opts.WaitTimeout)
	res, err = cmds[0].Result()
	if err != nil {
		return nil, nil, err
	}
	return res, r.waitError(wait), nil
}

// waitError turns a WAIT reply into nil or an error wrapping ErrNotReplicated.
func (r *Replicator) waitError(wait *redis.IntCmd) error {
	n, err := wait.Result()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if n < int64(r.opts.WaitReplicas) {
		r.stats.unreplicated.Add(1)
		return fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, r.opts.WaitReplicas, r.opts.WaitTimeout)
	}
	return nil
}

// nodeFor returns a client of the one server that holds key, so that a pipeline on it runs
// on one connection (which WAIT needs).
func (r *Replicator) nodeFor(ctx context.Context, key string) (redis.Cmdable, error) {
	if r.cluster != nil {
		return r.cluster.MasterForKey(ctx, key)
	}
	return r.client, nil
}

// targets turns the registry of the stored record into copies to write. Each copy's value
// ends with the record's, shortened by a random jitter (tombstones are not jittered), and
// its key with its registration; both are absolute, so they hold however late the write runs.
func (r *Replicator) targets(key string, rec record, lay *layout) []target {
	out := make([]target, 0, len(rec.reg))
	expiry := r.copyExpiry(rec)
	for _, e := range rec.reg {
		t := target{index: ForeignIndex, key: r.copyKey(e.slot, key), expiry: expiry, until: e.expiry}
		if lay != nil {
			for j, ls := range lay.slots {
				if ls == e.slot {
					t.index = j
				}
			}
		}
		out = append(out, t)
	}
	return out
}

// copyExpiry returns when a copy of rec ends: rec's expiry, shortened for a value by a random
// fraction in [0, Options.Jitter) of its remaining life.
func (r *Replicator) copyExpiry(rec record) int64 {
	if rec.tombstone || rec.expiry == 0 {
		return rec.expiry
	}
	remaining := rec.expiry - r.opts.Clock().UnixMilli()
	if remaining <= 0 {
		return rec.expiry
	}
	u := float64(r.opts.Rand()>>11) / (1 << 53)
	return rec.expiry - int64(float64(remaining)*r.opts.Jitter*u)
}

// writeCopies writes rec to every target with copy.lua in one pipeline (go-redis groups it
// per node, and internal/script reloads the script on NOSCRIPT; with Options.WaitReplicas,
// one pipeline and WAIT per node) and reports the failures as a *PartialWriteError. written
// counts writes that already succeeded (the primary).
func (r *Replicator) writeCopies(ctx context.Context, key string, rec record, targets []target, written int) error {
	if len(targets) == 0 {
		return nil
	}
	var failed []CopyError
	collect := func(ts []target, cmds []*redis.Cmd, waitErr error) {
		f, n := judgeCopies(ts, cmds, waitErr)
		failed, written = append(failed, f...), written+n
	}
	if r.opts.WaitReplicas == 0 {
		// A failed script load leaves each call's NOSCRIPT error in its command: those
		// copies are reported as failed.
		cmds, _ := script.Pipeline(ctx, r.client, copyCalls(rec, targets))
		collect(targets, cmds, nil)
	} else {
		for _, g := range r.byNode(ctx, targets) {
			if g.err != nil {
				for _, t := range g.targets {
					failed = append(failed, CopyError{Index: t.index, Key: t.key, Err: g.err})
				}
				continue
			}
			cmds, wait := script.PipelineWait(ctx, g.node, copyCalls(rec, g.targets), r.opts.WaitReplicas, r.opts.WaitTimeout)
			collect(g.targets, cmds, r.waitError(wait))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	r.stats.partialWrites.Add(1)
	r.kickRefresh()
	return &PartialWriteError{Key: key, Written: written, Failed: failed}
}

// copyCalls returns the copy.lua calls that write rec to targets.
func copyCalls(rec record, targets []target) []script.Call {
	version, kind := strconv.FormatUint(rec.version, 10), kindOf(rec)
	out := make([]script.Call, len(targets))
	for i, t := range targets {
		out[i] = script.Call{Script: copyScript, Keys: []string{t.key}, Args: []any{version, kind, rec.data, t.expiry, t.until}}
	}
	return out
}

// judgeCopies reads the replies of the copy writes to targets (cmds[i] wrote targets[i]):
// it returns the copies that failed, with why (the command's error, ErrConflict, or waitErr:
// the WAIT after them was not satisfied), and how many were written.
func judgeCopies(targets []target, cmds []*redis.Cmd, waitErr error) (failed []CopyError, written int) {
	for i, c := range cmds {
		err := c.Err()
		if err == nil {
			if replyStatus(c.Val()) == setConflict {
				err = ErrConflict
			} else {
				err = waitErr
			}
		}
		if err != nil {
			failed = append(failed, CopyError{Index: targets[i].index, Key: targets[i].key, Err: err})
			continue
		}
		written++
	}
	return failed, written
}

// nodeGroup is the copies one server holds.
type nodeGroup struct {
	node    redis.Cmdable
	targets []target
	err     error
}

// byNode groups targets by the server holding them.
func (r *Replicator) byNode(ctx context.Context, targets []target) []*nodeGroup {
	if r.cluster == nil {
		return []*nodeGroup{{node: r.client, targets: targets}}
	}
	groups := map[string]*nodeGroup{}
	var out []*nodeGroup
	for _, t := range targets {
		node, err := r.cluster.MasterForKey(ctx, t.key)
		id := "error"
		if err == nil {
			id = node.Options().Addr
		}
		g := groups[id]
		if g == nil {
			g = &nodeGroup{node: node, err: err}
			groups[id] = g
			out = append(out, g)
		}
		g.targets = append(g.targets, t)
	}
	return out
}

// replyStatus returns the status of a script's reply {status, ...}, or "" when v is not
// one.
func replyStatus(v any) string {
	res, _ := v.([]any)
	if len(res) == 0 {
		return ""
	}
	s, _ := res[0].(string)
	return s
}

// register runs register.lua: it adds slots to key's registry and returns the primary
// record after it. found is false when the primary holds no live value or tombstone.
func (r *Replicator) register(ctx context.Context, key, slots string) (rec record, found bool, err error) {
	res, err := registerScript.Run(ctx, r.client, []string{r.primaryKey(key)}, slots).Slice()
	if err != nil {
		return rec, false, err
	}
	if replyStatus(res) == "none" {
		return rec, false, nil
	}
	var raw string
	if len(res) == 2 {
		raw, _ = res[1].(string)
	}
	rec, ok := decode(raw)
	if !ok {
		return rec, false, ErrCorrupt
	}
	return rec, true, nil
}
