package migrate

import (
	"context"
	"fmt"
	"strings"
)

// journalTag is the hash tag of every journal key, so create and step can touch the record
// and the unit's lock in one script on a clustered control Redis.
func (c *Coordinator) journalTag() string { return "{" + c.o.Prefix + ":migrate}" }

func (c *Coordinator) journalKey(id string) string { return c.journalTag() + ":j:" + id }

func (c *Coordinator) lockKey(s Status) string {
	return c.journalTag() + ":lock:" + c.keys.Tag(s.Unit)
}

func (c *Coordinator) indexKey() string { return c.journalTag() + ":index" }

// create writes a new journal record and takes the unit's lock.
func (c *Coordinator) create(ctx context.Context, s Status) error {
	args := []any{s.ID, ms(s.Created)}
	args = append(args, s.fields()...)
	args = append(args, "state", string(s.State))
	reply, err := createScript.Run(ctx, c.control,
		[]string{c.journalKey(s.ID), c.lockKey(s), c.indexKey()}, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: create journal record %q: %w", s.ID, err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "ok":
		return nil
	case len(reply) == 2 && reply[0] == "busy":
		return &BusyError{Unit: s.Unit.String(), Holder: reply[1]}
	case len(reply) == 1 && reply[0] == "exists":
		return errInput("migration ID %q is already used", s.ID)
	}
	return fmt.Errorf("migrate: create journal record %q: malformed reply %q", s.ID, reply)
}

// load reads a migration's journal record.
func (c *Coordinator) load(ctx context.Context, id string) (Status, error) {
	if id == "" {
		return Status{}, errInput("empty migration ID")
	}
	m, err := c.control.HGetAll(ctx, c.journalKey(id)).Result()
	if err != nil {
		return Status{}, fmt.Errorf("migrate: read journal record %q: %w", id, err)
	}
	if len(m) == 0 {
		return Status{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return parseStatus(m)
}

// stateError reports that the journal's state was not one a step expected.
type stateError struct {
	id    string
	found State
	want  []State
}

func (e *stateError) Error() string {
	return fmt.Sprintf("migrate: migration %q is %s, expected one of %v", e.id, e.found, e.want)
}

func (e *stateError) Is(target error) bool {
	return target == ErrCancelled && (e.found == Cancelling || e.found == Cancelled)
}

// step moves the journal record from one of the expected states to state `to` and sets the
// given fields, by compare-and-set, and stores the record the script returns into *s. A
// retry of a step that already happened (the record is at `to` already and `to` is not among
// the expected states) is taken as done: the record is reloaded as it is. release frees the
// unit's lock.
func (c *Coordinator) step(ctx context.Context, s *Status, expect []State, to State, release bool, kv ...string) error {
	rel := "0"
	if release {
		rel = "1"
	}
	exp := make([]string, len(expect))
	for i, e := range expect {
		exp[i] = string(e)
	}
	args := []any{strings.Join(exp, ","), string(to), rel, s.ID, "updated", ms(c.o.Now())}
	for _, v := range kv {
		args = append(args, v)
	}
	reply, err := stepScript.Run(ctx, c.control, []string{c.journalKey(s.ID), c.lockKey(*s)}, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("migrate: journal step of %q to %s: %w", s.ID, to, err)
	}
	var ns Status
	switch {
	case len(reply) >= 2 && len(reply)%2 == 0 && reply[0] == "ok":
		m := make(map[string]string, len(reply)/2)
		for i := 2; i+1 < len(reply); i += 2 {
			m[reply[i]] = reply[i+1]
		}
		if ns, err = parseStatus(m); err != nil {
			return err
		}
	case len(reply) == 2 && reply[0] == "changed":
		if State(reply[1]) != to {
			return &stateError{id: s.ID, found: State(reply[1]), want: expect}
		}
		if ns, err = c.load(ctx, s.ID); err != nil {
			return err
		}
	case len(reply) == 1 && reply[0] == "missing":
		return fmt.Errorf("%w: %q", ErrNotFound, s.ID)
	default:
		return fmt.Errorf("migrate: journal step of %q: malformed reply %q", s.ID, reply)
	}
	prev := s.State
	*s = ns
	if prev != s.State {
		c.stats.steps.Add(1)
		if c.o.Logger != nil {
			c.o.Logger.InfoContext(ctx, "migrate: state change", "id", s.ID, "unit", s.Unit.String(),
				"source", s.Source, "target", s.Target, "from", string(prev), "to", string(s.State), "reason", s.Reason)
		}
	}
	if c.o.OnState != nil {
		c.o.OnState(*s)
	}
	return nil
}
