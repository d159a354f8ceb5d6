package routing

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/routingfmt"
)

// ShardClient is the part of a go-redis client a shard's Redis serves a Shard and a Router:
// script execution and the plain commands used to read ownership records and change logs.
// *redis.Client, *redis.ClusterClient and redis.UniversalClient satisfy it. (The control
// Redis's client is a [Control]; package migrate uses the same two names.)
type ShardClient interface {
	redis.Scripter
	HMGet(ctx context.Context, key string, fields ...string) *redis.SliceCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// Scripter is the former name of ShardClient.
//
// Deprecated: use ShardClient.
type Scripter = ShardClient

var (
	_ ShardClient = (*redis.Client)(nil)
	_ ShardClient = (*redis.ClusterClient)(nil)
	_ ShardClient = redis.UniversalClient(nil)
)

// Shard is the shard side of routing: one named Redis deployment (a standalone server or a
// whole cluster) holding the ownership records and the guarded record store of the units it
// owns. It is safe for concurrent use and holds no goroutines.
type Shard struct {
	name    string
	client  ShardClient
	keys    Keys
	opTTL   int64
	tombTTL int64
	logMax  int64
	now     func() time.Time
}

// NewShard returns the shard named name served by client. name must be non-empty valid
// UTF-8, as a table's shard names are. Bad arguments and options give an error wrapping
// ErrInvalid that names the field.
func NewShard(name string, client ShardClient, o ShardOptions) (*Shard, error) {
	if err := checkShardName("shard name", name); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, invalidf("shard %q: client must not be nil", name)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Shard{
		name:    name,
		client:  client,
		keys:    Keys{Prefix: o.Prefix},
		opTTL:   o.OpRetention.Milliseconds(),
		tombTTL: o.TombstoneRetention.Milliseconds(),
		logMax:  o.LogMaxLen,
		now:     o.Clock,
	}, nil
}

// Name returns the shard's name.
func (s *Shard) Name() string { return s.name }

// Client returns the client the shard was built with.
func (s *Shard) Client() ShardClient { return s.client }

// Keys returns the key layout the shard uses.
func (s *Shard) Keys() Keys { return s.keys }

// Exec runs one guarded write for tenant in unit, routed by generation gen, under operation
// ID opID, as one script on the unit's slot (see the package documentation for what it checks).
//
// It returns a [*StaleRouteError] (errors.Is ErrStaleRoute) when the shard does not admit
// gen for the unit, ErrConflict when opID was recorded for another operation, and a
// [*VersionMismatchError] when a conditional write found another version. In all three
// cases nothing changed. A retry of an operation already recorded returns its first result
// (or its first mismatch) with Result.Replayed set. An error from Redis leaves the outcome
// unknown; retry with the same opID.
func (s *Shard) Exec(ctx context.Context, u Unit, gen uint64, tenant, opID string, op Op) (Result, error) {
	if err := checkArgs(u, gen, tenant); err != nil {
		return Result{}, err
	}
	if opID == "" {
		return Result{}, errInput("empty operation ID")
	}
	if err := op.validate(); err != nil {
		return Result{}, err
	}
	k := s.keys.unit(u)
	check := "0"
	if op.Check {
		check = "1"
	}
	reply, err := writeScript.Run(ctx, s.client,
		[]string{k.Own, k.Records, k.Ops, k.OpExpiry, k.Tombstones, k.Log},
		strconv.FormatUint(gen, 10), tenant, opID, op.fingerprint(tenant), op.kindArg(),
		routingfmt.RecordField(tenant, op.Key), check, strconv.FormatUint(op.Version, 10), op.Value,
		strconv.FormatInt(s.now().UnixMilli(), 10), strconv.FormatInt(s.opTTL, 10),
		strconv.FormatInt(s.tombTTL, 10), strconv.FormatInt(s.logMax, 10),
	).StringSlice()
	if err != nil {
		return Result{}, fmt.Errorf("routing: write on shard %q %s: %w", s.name, u, err)
	}
	return s.writeResult(u, gen, opID, op, reply)
}

// writeResult decodes the write script's reply into Exec's result or error. It is pure.
func (s *Shard) writeResult(u Unit, gen uint64, opID string, op Op, reply []string) (Result, error) {
	if len(reply) == 0 {
		return Result{}, fmt.Errorf("routing: write on shard %q %s: empty reply", s.name, u)
	}
	switch reply[0] {
	case "stale":
		return Result{}, s.stale(u, gen, reply)
	case "conflict":
		return Result{}, fmt.Errorf("%w: op %q in %s on shard %q", ErrConflict, opID, u, s.name)
	case "dup", "done":
		if len(reply) != 3 {
			return Result{}, fmt.Errorf("routing: write on shard %q: malformed reply %q", s.name, reply)
		}
		v, err := strconv.ParseUint(reply[2], 10, 64)
		if err != nil {
			return Result{}, fmt.Errorf("routing: write on shard %q: malformed version %q", s.name, reply[2])
		}
		res := Result{Version: v, Replayed: reply[0] == "dup"}
		switch routingfmt.Outcome(reply[1]) {
		case routingfmt.OutcomeApplied:
			res.Applied = true
		case routingfmt.OutcomeAbsent:
		case routingfmt.OutcomeMismatch:
			return res, &VersionMismatchError{Key: op.Key, Expected: op.Version, Current: v}
		default:
			return Result{}, fmt.Errorf("routing: write on shard %q: unknown outcome %q", s.name, reply[1])
		}
		return res, nil
	}
	return Result{}, fmt.Errorf("routing: write on shard %q: unknown reply %q", s.name, reply)
}

// Get reads tenant's record key in unit, routed by generation gen. It returns the record
// (Deleted set for a tombstone) and whether one exists. A shard that does not admit gen for
// the unit returns a [*StaleRouteError]: reads are only served by the open owner.
func (s *Shard) Get(ctx context.Context, u Unit, gen uint64, tenant, key string) (Record, bool, error) {
	if err := checkArgs(u, gen, tenant); err != nil {
		return Record{}, false, err
	}
	if key == "" {
		return Record{}, false, errInput("empty key")
	}
	k := s.keys.unit(u)
	reply, err := getScript.Run(ctx, s.client, []string{k.Own, k.Records},
		strconv.FormatUint(gen, 10), tenant, routingfmt.RecordField(tenant, key)).StringSlice()
	if err != nil {
		return Record{}, false, fmt.Errorf("routing: get on shard %q %s: %w", s.name, u, err)
	}
	switch {
	case len(reply) > 0 && reply[0] == "stale":
		return Record{}, false, s.stale(u, gen, reply)
	case len(reply) == 1 && reply[0] == "ok":
		return Record{}, false, nil
	case len(reply) == 2 && reply[0] == "ok":
		r, err := routingfmt.DecodeRecord(reply[1])
		return r, err == nil, err
	}
	return Record{}, false, fmt.Errorf("routing: get on shard %q: malformed reply %q", s.name, reply)
}

func (s *Shard) stale(u Unit, gen uint64, reply []string) error {
	e := &StaleRouteError{Shard: s.name, Unit: u, Sent: gen}
	if len(reply) == 4 {
		e.Owner.Generation, _ = strconv.ParseUint(reply[1], 10, 64)
		e.Owner.State = State(reply[2])
		e.Moved = reply[3] == "1"
	}
	return e
}

func checkArgs(u Unit, gen uint64, tenant string) error {
	if err := u.Validate(); err != nil {
		return err
	}
	if gen == 0 {
		return errInput("route generation must be >= 1")
	}
	if err := checkTenant(tenant); err != nil {
		return err
	}
	if u.Kind != KindBucket && u.Tenant != tenant {
		return errInput(fmt.Sprintf("tenant %q does not belong to %s", tenant, u))
	}
	return nil
}

func errInput(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }
