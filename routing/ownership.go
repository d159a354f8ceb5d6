package routing

import (
	"context"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strconv"
	"strings"
)

// State is the state of a unit's ownership record on one shard. Only StateOpen admits
// writes and reads; every other state refuses them with ErrStaleRoute. States are words of
// letters; migrate may use its own (for example "importing") besides the ones below.
type State string

// The ownership states routing itself knows.
const (
	StateNone      State = ""          // StateNone: no ownership record on this shard.
	StateOpen      State = "open"      // StateOpen: this shard owns the unit and takes writes.
	StateClosed    State = "closed"    // StateClosed: writes refused; the change log is final.
	StateImporting State = "importing" // StateImporting: the unit is being copied here; not yet owned.
)

// Ownership is a unit's ownership record on one shard: the generation from which this shard
// owns (or owned) the unit, and its state. A write routed by generation g is admitted only
// if State is StateOpen and Generation <= g. The zero value means "no record".
type Ownership struct {
	Generation uint64 // Generation is the route generation the record was set at.
	State      State  // State is the record's state.
}

// String returns "gen 12 open" or "none".
func (o Ownership) String() string {
	if o.State == StateNone {
		return "none"
	}
	return "gen " + strconv.FormatUint(o.Generation, 10) + " " + string(o.State)
}

// Ownership reads unit u's ownership record on this shard, the zero Ownership if there is
// none, and the tenants marked as moved out of it (bucket units only) with the generation
// they were marked at.
func (s *Shard) Ownership(ctx context.Context, u Unit) (Ownership, map[string]uint64, error) {
	if err := u.Validate(); err != nil {
		return Ownership{}, nil, err
	}
	m, err := bound.Do(ctx, func() (map[string]string, error) { return s.client.HGetAll(ctx, s.keys.unit(u).Own).Result() })
	if err != nil {
		return Ownership{}, nil, fmt.Errorf("routing: read ownership of %s on shard %q: %w", u, s.name, err)
	}
	var o Ownership
	var moved map[string]uint64
	for k, v := range m {
		switch {
		case k == "gen":
			o.Generation, err = strconv.ParseUint(v, 10, 64)
			if err != nil {
				return Ownership{}, nil, fmt.Errorf("routing: malformed ownership generation %q of %s on shard %q", v, u, s.name)
			}
		case k == "state":
			o.State = State(v)
		case strings.HasPrefix(k, "x:"):
			g, _ := strconv.ParseUint(v, 10, 64)
			if moved == nil {
				moved = make(map[string]uint64)
			}
			moved[k[2:]] = g
		}
	}
	return o, moved, nil
}

// Transition changes unit u's ownership record on this shard from `from` to `to` in one
// script, and returns the unit's last change-log entry ID ("0-0" if none).
//
// It is a compare-and-set: if the record is neither from nor already to, nothing changes and
// the error wraps ErrOwnershipChanged and names the record found. A retry of a transition
// that already happened (lost reply) succeeds again. to.Generation must be >= 1 and
// >= from.Generation: generations never go backwards on a shard. Use from = Ownership{} to
// create a record.
//
// When `to` refuses writes (any state but open), the returned ID is final: every write that
// was admitted before the transition is at or before it, and none can follow. This is the
// write barrier migrate builds on.
func (s *Shard) Transition(ctx context.Context, u Unit, from, to Ownership) (string, error) {
	return s.transition(ctx, u, from, to, "", false, 0, "")
}

// TransitionFenced is [Shard.Transition] for an actor that carries a fencing epoch (a
// migration driver): in the same script as the change, it is refused with a
// [*FencedError] (ErrFenced) if an actor with a higher epoch already acted on u's record on
// this shard, and otherwise raises the record's fence to epoch, so that every older actor is
// refused from then on. The fence is raised even when the compare-and-set fails. epoch must
// be >= 1.
func (s *Shard) TransitionFenced(ctx context.Context, u Unit, from, to Ownership, epoch uint64) (string, error) {
	if epoch == 0 {
		return "", errInput("fencing epoch must be >= 1")
	}
	return s.transition(ctx, u, from, to, "", false, epoch, "")
}

// TransitionFencedIfReady is [Shard.TransitionFenced] made only while the record's "ready"
// field holds ready (the mark migrate sets on a target once its copy is verified), checked
// in the same script: a record without it (a shard restored to a point before the mark)
// is not changed and the error matches ErrNotReady.
func (s *Shard) TransitionFencedIfReady(ctx context.Context, u Unit, from, to Ownership, epoch uint64, ready string) (string, error) {
	if epoch == 0 {
		return "", errInput("fencing epoch must be >= 1")
	}
	if ready == "" {
		return "", errInput("ready must not be empty")
	}
	return s.transition(ctx, u, from, to, "", false, epoch, ready)
}

// MarkMoved marks tenant as moved out of bucket unit u (or clears the mark when moved is
// false) and changes the bucket's record from `from` to `to` in the same script, with the
// same compare-and-set and retry rules as [Shard.Transition]. While the mark is set, the
// bucket refuses that tenant's reads and writes with ErrStaleRoute; the returned change-log
// ID is final for the tenant. Pass to = from to change only the mark.
func (s *Shard) MarkMoved(ctx context.Context, u Unit, tenant string, moved bool, from, to Ownership) (string, error) {
	if u.Kind != KindBucket {
		return "", errInput("MarkMoved needs a bucket unit, got " + u.String())
	}
	if err := checkTenant(tenant); err != nil {
		return "", err
	}
	return s.transition(ctx, u, from, to, tenant, moved, 0, "")
}

// MarkMovedFenced is [Shard.MarkMoved] fenced by epoch, as [Shard.TransitionFenced] is.
func (s *Shard) MarkMovedFenced(ctx context.Context, u Unit, tenant string, moved bool, from, to Ownership, epoch uint64) (string, error) {
	if u.Kind != KindBucket {
		return "", errInput("MarkMoved needs a bucket unit, got " + u.String())
	}
	if err := checkTenant(tenant); err != nil {
		return "", err
	}
	if epoch == 0 {
		return "", errInput("fencing epoch must be >= 1")
	}
	return s.transition(ctx, u, from, to, tenant, moved, epoch, "")
}

func (s *Shard) transition(ctx context.Context, u Unit, from, to Ownership, tenant string, moved bool, epoch uint64, ready string) (string, error) {
	if err := checkTransition(u, from, to); err != nil {
		return "", err
	}
	mark := "0"
	if moved {
		mark = "1"
	}
	fence := ""
	if epoch > 0 {
		fence = strconv.FormatUint(epoch, 10)
	}
	k := s.keys.unit(u)
	reply, err := ownScript.Run(ctx, s.client, []string{k.Own, k.Log},
		strconv.FormatUint(from.Generation, 10), string(from.State),
		strconv.FormatUint(to.Generation, 10), string(to.State), tenant, mark, fence, ready).StringSlice()
	if err != nil {
		return "", fmt.Errorf("routing: transition of %s on shard %q: %w", u, s.name, err)
	}
	if len(reply) != 4 {
		return "", fmt.Errorf("routing: transition of %s on shard %q: malformed reply %q", u, s.name, reply)
	}
	if reply[0] == "fenced" {
		f, _ := strconv.ParseUint(reply[1], 10, 64)
		return reply[3], &FencedError{Unit: u, Shard: s.name, Epoch: epoch, Fence: f}
	}
	if reply[0] == "unready" {
		return reply[3], fmt.Errorf("%w: %s on shard %q lacks the ready mark %q", ErrNotReady, u, s.name, ready)
	}
	if reply[0] != "ok" {
		g, _ := strconv.ParseUint(reply[1], 10, 64)
		found := Ownership{Generation: g, State: State(reply[2])}
		return reply[3], fmt.Errorf("%w: %s on shard %q is %v, expected %v", ErrOwnershipChanged, u, s.name, found, from)
	}
	return reply[3], nil
}

// checkTransition refuses a bad unit, a generation that is 0 or goes backwards, a state that
// is not letters, and a missing "from" record with a generation.
func checkTransition(u Unit, from, to Ownership) error {
	if err := u.Validate(); err != nil {
		return err
	}
	if to.Generation == 0 || to.Generation < from.Generation {
		return errInput(fmt.Sprintf("transition of %s from %v to %v: generation must be >= 1 and must not go backwards", u, from, to))
	}
	if to.State == StateNone || !letters(string(to.State)) || (from.State != StateNone && !letters(string(from.State))) {
		return errInput(fmt.Sprintf("transition of %s from %v to %v: states must be letters", u, from, to))
	}
	if from.State == StateNone && from.Generation != 0 {
		return errInput("from: a missing record has generation 0")
	}
	return nil
}

func letters(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
