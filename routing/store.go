package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Control is the part of a go-redis client a Store and a Router need in the control Redis.
// *redis.Client, *redis.ClusterClient and redis.UniversalClient satisfy it. (A shard's client
// is a [ShardClient]; package migrate uses the same two names.)
type Control interface {
	redis.Scripter
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

var (
	_ Control = (*redis.Client)(nil)
	_ Control = (*redis.ClusterClient)(nil)
	_ Control = redis.UniversalClient(nil)
)

// Store keeps route tables in the control Redis: the current table under one key, and an
// announcement of every new generation on a pub/sub channel. It is safe for concurrent use
// and holds no goroutines.
type Store struct {
	client Control
	keys   Keys
	shards map[string]*Shard // the shards tables name, to check new placements; nil: none
}

// NewStore returns a store over the control Redis client. With StoreOptions.Shards it
// checks new placements before it publishes them (see [Store.Publish]).
func NewStore(client Control, o StoreOptions) (*Store, error) {
	if client == nil {
		return nil, invalidf("control client must not be nil")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	st := &Store{client: client, keys: Keys{Prefix: o.Prefix}}
	if len(o.Shards) > 0 {
		st.shards = make(map[string]*Shard, len(o.Shards))
		for name, c := range o.Shards {
			sh, err := NewShard(name, c, ShardOptions{Prefix: o.Prefix})
			if err != nil {
				return nil, err
			}
			st.shards[name] = sh
		}
	}
	return st, nil
}

// GenerationConflictError is the typed form of ErrGenerationConflict.
type GenerationConflictError struct {
	Current   uint64 // Current is the generation in the store.
	Attempted uint64 // Attempted is the generation the caller tried to publish.
}

// Error implements error.
func (e *GenerationConflictError) Error() string {
	return fmt.Sprintf("routing: cannot publish generation %d: current generation is %d (want exactly %d)",
		e.Attempted, e.Current, e.Current+1)
}

// Is makes errors.Is(err, ErrGenerationConflict) true.
func (e *GenerationConflictError) Is(target error) bool { return target == ErrGenerationConflict }

// Publish makes t the current table, if t.Generation is exactly the current generation + 1
// (1 for the first table), and announces it. Otherwise it returns a
// [*GenerationConflictError] and changes nothing: generations never repeat, so returning a
// unit to its old shard is a new generation. Publishing the same table again after a lost
// reply succeeds. Publish does not move data: a table that reassigns a unit with records is
// published by a migration after the new owner opened.
//
// Unit names depend on B and on the width of each spread, so a table that changes
// Table.Buckets or the number of sub-buckets of a tenant that stays spread is refused with
// ErrInvalidTable: a client on the older table would write into units of the same names
// that now hold other records. (Every stored table is checked against its predecessor, so B
// is the first table's for the store's life.) The table that ends a re-split, which closed
// the old sub-buckets and opened the new ones at its generation, is published with
// [Store.PublishReshaped].
//
// A table that newly places a tenant (an override or a spread for a tenant the current
// table routes by its hash bucket) would hide whatever the tenant has in that bucket: the
// new unit opens empty (Provision refuses it) and the tenant is unreadable until the table
// is reverted. A Store that knows the shards (the one [Router.Store] returns, or one built
// with StoreOptions.Shards) therefore first marks each such tenant as moved out of its
// bucket (a client on an older table is refused there from that instant, see
// [Shard.MarkMoved]), then looks for the tenant's records, tombstones and idempotency
// records in the bucket, and refuses the table with ErrTenantHasData if it finds any,
// clearing its marks (such a tenant moves with a tenant migration, package migrate). The
// marks of a table that was refused (a generation conflict, a guard) are cleared; after
// another error (a lost reply) they stay, as the publication may have happened, and a
// retry finds them. A later table that drops such a placement before any of its units was
// opened (a placement reverted before Provision) clears the tenant's mark once it is
// published, so the tenant writes in its bucket again; a placement whose unit was opened
// returns by a fold-back. A Store built without shards does not check: it is the low-level path
// that package migrate, which moves the data first, publishes through.
func (s *Store) Publish(ctx context.Context, t *Table) error {
	return s.publish(ctx, t, "", nil, "")
}

// PublishGuarded is [Store.Publish] that publishes only if the hash at guardKey holds the
// given field values, checked in the same script as the publication; otherwise it returns
// an error wrapping ErrFenced and changes nothing. guardKey must carry the hash tag
// [Keys.ControlTag] so that it shares the table's slot on a clustered control Redis; want
// must name at least one field. migrate uses it so that only the current driver of a
// migration (its fencing epoch in the journal) can publish the table that ends it.
func (s *Store) PublishGuarded(ctx context.Context, t *Table, guardKey string, want map[string]string) error {
	if !strings.HasPrefix(guardKey, s.keys.ControlTag()) || len(want) == 0 {
		return errInput(fmt.Sprintf("guard key must start with %q and name at least one field, got %q with %d",
			s.keys.ControlTag(), guardKey, len(want)))
	}
	return s.publish(ctx, t, guardKey, want, "")
}

// PublishReshaped is [Store.PublishGuarded] for the table that ends a re-split: it may
// change the number of sub-buckets of tenant's spread (every other rule of Publish holds).
// migrate calls it only after it closed every old sub-bucket of the tenant at its
// generation and opened every new one at a generation no lower than any router on the
// older table holds, so a client on the older table is refused by both (routing.ErrStaleRoute)
// instead of writing into a unit of the same name that now holds other records.
func (s *Store) PublishReshaped(ctx context.Context, t *Table, guardKey string, want map[string]string, tenant string) error {
	if tenant == "" || !strings.HasPrefix(guardKey, s.keys.ControlTag()) || len(want) == 0 {
		return errInput(fmt.Sprintf("a reshaped publication needs a tenant and a guard key starting with %q naming at least one field, got tenant %q, key %q with %d",
			s.keys.ControlTag(), tenant, guardKey, len(want)))
	}
	return s.publish(ctx, t, guardKey, want, tenant)
}

func (s *Store) publish(ctx context.Context, t *Table, guardKey string, want map[string]string, reshaped string) error {
	if err := t.Validate(); err != nil {
		return err
	}
	var marks []markedTenant
	var prev *Table
	if t.Generation > 1 {
		cur, err := s.Load(ctx)
		if err != nil && !errors.Is(err, ErrNoTable) {
			return fmt.Errorf("routing: publish generation %d: %w", t.Generation, err)
		}
		if cur != nil && cur.Generation+1 >= t.Generation {
			if err := sameUnits(cur, t, reshaped); err != nil {
				return err
			}
		}
		if cur != nil && s.shards != nil && cur.Generation+1 == t.Generation {
			if marks, err = s.guardPlacements(ctx, cur, t); err != nil {
				return err
			}
			prev = cur
		}
	}
	err := s.publishScripted(ctx, t, guardKey, want)
	switch {
	case err != nil && unpublished(err):
		s.undoMarks(ctx, marks)
	case err == nil && prev != nil:
		s.unmarkUnopened(ctx, prev, t)
	}
	return err
}

// publishScripted runs publish.lua for t and the guard.
func (s *Store) publishScripted(ctx context.Context, t *Table, guardKey string, want map[string]string) error {
	keys, args, err := s.publishArgs(t, guardKey, want)
	if err != nil {
		return err
	}
	reply, err := publishScript.Run(ctx, s.client, keys, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("routing: publish generation %d: %w", t.Generation, err)
	}
	return publishResult(t.Generation, guardKey, want, reply)
}

// publishArgs encodes t and the guard (its fields in sorted order) as publish.lua's keys
// and arguments.
func (s *Store) publishArgs(t *Table, guardKey string, want map[string]string) ([]string, []any, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, nil, fmt.Errorf("routing: encode table: %w", err)
	}
	keys := []string{s.keys.Table()}
	args := []any{strconv.FormatUint(t.Generation, 10), string(b), s.keys.Channel()}
	if guardKey != "" {
		keys = append(keys, guardKey)
		fields := make([]string, 0, len(want))
		for f := range want {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		for _, f := range fields {
			args = append(args, f, want[f])
		}
	}
	return keys, args, nil
}

// publishResult decodes publish.lua's reply. It is pure.
func publishResult(gen uint64, guardKey string, want map[string]string, reply []string) error {
	if len(reply) != 2 {
		return fmt.Errorf("routing: publish generation %d: malformed reply %q", gen, reply)
	}
	if reply[0] == "guard" {
		return fmt.Errorf("%w: publication of generation %d refused: guard %q no longer holds %s = %q",
			ErrFenced, gen, guardKey, reply[1], want[reply[1]])
	}
	if reply[0] != "ok" {
		cur, _ := strconv.ParseUint(reply[1], 10, 64)
		return &GenerationConflictError{Current: cur, Attempted: gen}
	}
	return nil
}

// sameUnits reports whether next keeps prev's unit names: the same B, and the same width for
// every tenant spread in both (but reshaped, when not empty).
func sameUnits(prev, next *Table, reshaped string) error {
	if prev.Buckets != next.Buckets {
		return fmt.Errorf("%w: generation %d changes Buckets from %d to %d; B is fixed", ErrInvalidTable,
			next.Generation, prev.Buckets, next.Buckets)
	}
	for tenant, ss := range next.Spreads {
		if old, ok := prev.Spreads[tenant]; ok && len(old) != len(ss) && tenant != reshaped {
			return fmt.Errorf("%w: generation %d changes the spread of tenant %q from %d to %d sub-buckets",
				ErrInvalidTable, next.Generation, tenant, len(old), len(ss))
		}
	}
	return nil
}

// Load returns the current table, or ErrNoTable if none was published.
func (s *Store) Load(ctx context.Context) (*Table, error) {
	vals, err := bound.Do(ctx, func() ([]any, error) { return s.client.HMGet(ctx, s.keys.Table(), "gen", "table").Result() })
	if err != nil {
		return nil, fmt.Errorf("routing: load table: %w", err)
	}
	js, _ := vals[1].(string)
	if js == "" {
		return nil, ErrNoTable
	}
	var t Table
	if err := json.Unmarshal([]byte(js), &t); err != nil {
		return nil, fmt.Errorf("routing: decode table: %w", err)
	}
	if g, _ := vals[0].(string); g != strconv.FormatUint(t.Generation, 10) {
		return nil, fmt.Errorf("routing: stored generation %q does not match its table (%d)", g, t.Generation)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("routing: stored table: %w", err)
	}
	return &t, nil
}

// Keys returns the key layout the store uses.
func (s *Store) Keys() Keys { return s.keys }
