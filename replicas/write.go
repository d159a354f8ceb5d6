package replicas

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Set stores value under key with the host's version, for ttl (0 means
// Options.DefaultTTL; a negative ttl is an error).
//
// The logical key is written first, with set-if-newer: if it holds a newer version (or a
// tombstone of the same version), nothing is written and Set returns ErrStaleVersion; if
// that write fails, nothing else is written and Set returns its error (retry with the same
// version: a write that did apply is recognised and completed). Then every copy registered
// at the logical key (this instance's copies when the key is hot here, and those of other
// instances) is written, pipelined per node, each with set-if-newer and its own TTL,
// shortened by a random jitter and never longer than its registration. If some copies fail,
// Set returns a *PartialWriteError naming them; the copies not named hold this version or a
// newer one.
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
// Options.TombstoneTTL: until then any Set or fill of this version or older is refused, so a
// late write cannot resurrect the value. The logical key's tombstone also lasts as long as
// the copies registered there, so a copy named in a *PartialWriteError is still updated by
// later writes. Errors are as for Set.
func (r *Replicator) Delete(ctx context.Context, key string, version uint64) error {
	if key == "" {
		return errEmptyKey
	}
	return r.write(ctx, key, record{version: version, tombstone: true}, r.opts.TombstoneTTL)
}

// target is one copy to write.
type target struct {
	index int    // position in this instance's layout, or -2
	key   string // physical key
	ttl   time.Duration
}

func kindOf(rec record) string {
	if rec.tombstone {
		return kindTombstone
	}
	return kindValue
}

// write runs set.lua on the logical key, then on the copies its registry lists.
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
	start := time.Now()
	res, err := setScript.Run(ctx, r.client, []string{key},
		strconv.FormatUint(rec.version, 10), kindOf(rec), rec.data, ttl.Milliseconds(), add).Int64Slice()
	if err != nil {
		return fmt.Errorf("replicas: write %q: %w", key, err)
	}
	if len(res) == 0 || len(res)%2 != 1 {
		return fmt.Errorf("replicas: write %q: unexpected reply %v", key, res)
	}
	if res[0] == setStale {
		r.stats.staleWrites.Add(1)
		return fmt.Errorf("replicas: write %q version %d: %w", key, rec.version, ErrStaleVersion)
	}
	return r.writeCopies(ctx, key, rec, r.targets(key, rec, lay, res[1:], ttl, time.Since(start)), 1)
}

// targets turns set.lua's registry pairs into copies to write. Each copy's TTL is the
// jittered ttl, cut to its registration's remaining life minus the time spent since the
// script was sent, so no copy outlives the registration that makes writers update it.
func (r *Replicator) targets(key string, rec record, lay *layout, pairs []int64, ttl, elapsed time.Duration) []target {
	out := make([]target, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		s, remaining := uint16(pairs[i]), time.Duration(pairs[i+1])*time.Millisecond-elapsed
		t := target{index: -2, key: r.copyKey(s, key), ttl: r.copyTTL(rec, ttl, remaining)}
		if lay != nil {
			for j, ls := range lay.slots {
				if ls == s {
					t.index = j
				}
			}
		}
		if t.ttl > 0 {
			out = append(out, t)
		}
	}
	return out
}

// copyTTL returns ttl shortened by a random fraction in [0, Options.Jitter), and at most
// limit. A tombstone is not shortened: it must refuse late older writes at every copy for
// as long as at the logical key. A result under 1ms means the copy is not worth writing.
func (r *Replicator) copyTTL(rec record, ttl, limit time.Duration) time.Duration {
	d := ttl
	if !rec.tombstone {
		u := float64(r.opts.Rand()>>11) / (1 << 53)
		d -= time.Duration(float64(ttl) * r.opts.Jitter * u)
	}
	d = min(d, limit)
	if d < time.Millisecond {
		return 0
	}
	return d
}

// writeCopies writes rec to every target with set.lua in one pipeline (go-redis groups it
// per node) and reports the failures as a *PartialWriteError. written counts writes that
// already succeeded (the logical key).
func (r *Replicator) writeCopies(ctx context.Context, key string, rec record, targets []target, written int) error {
	if len(targets) == 0 {
		return nil
	}
	version, kind := strconv.FormatUint(rec.version, 10), kindOf(rec)
	run := func(ts []target, eval bool) []*redis.Cmd {
		pipe := r.client.Pipeline()
		cmds := make([]*redis.Cmd, len(ts))
		for i, t := range ts {
			args := []any{version, kind, rec.data, t.ttl.Milliseconds(), ""}
			if eval {
				cmds[i] = setScript.Eval(ctx, pipe, []string{t.key}, args...)
			} else {
				cmds[i] = setScript.EvalSha(ctx, pipe, []string{t.key}, args...)
			}
		}
		_, _ = pipe.Exec(ctx) // errors are read per command below
		return cmds
	}
	cmds := run(targets, false)
	var retry []target
	var retryAt []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, targets[i])
			retryAt = append(retryAt, i)
		}
	}
	if len(retry) > 0 {
		for j, c := range run(retry, true) {
			cmds[retryAt[j]] = c
		}
	}
	var failed []CopyError
	for i, c := range cmds {
		if err := c.Err(); err != nil {
			failed = append(failed, CopyError{Index: targets[i].index, Key: targets[i].key, Err: err})
			continue
		}
		written++
	}
	if len(failed) == 0 {
		return nil
	}
	r.stats.partialWrites.Add(1)
	r.kickRefresh()
	return &PartialWriteError{Key: key, Written: written, Failed: failed}
}

// register runs register.lua: it adds slots to key's registry and returns key's record and
// remaining life. found is false when the logical key holds no record.
func (r *Replicator) register(ctx context.Context, key, slots string) (rec record, pttl time.Duration, found bool, err error) {
	res, err := registerScript.Run(ctx, r.client, []string{key}, slots).Slice()
	if errors.Is(err, redis.Nil) {
		return rec, 0, false, nil
	}
	if err != nil {
		return rec, 0, false, err
	}
	if len(res) != 2 {
		return rec, 0, false, fmt.Errorf("unexpected reply %v", res)
	}
	raw, _ := res[0].(string)
	ms, _ := res[1].(int64)
	rec, ok := decode(raw)
	if !ok {
		return rec, 0, false, ErrCorrupt
	}
	return rec, time.Duration(ms) * time.Millisecond, true, nil
}
