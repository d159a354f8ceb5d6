package celebrity

import (
	"context"
	"fmt"
)

// Promote adds key to the fleet's hot set by hand (for a celebrity known in advance, such as
// a launch): every instance warms its copies and refreshes it ahead, and the fleet never
// demotes it; only Demote does. It is idempotent. This instance applies the change before
// Promote returns; the others as soon as the announcement reaches them (within one
// ReportInterval through the next heartbeat if it was lost, within 4 for an instance whose
// subscription is down).
func (c *Cache[V]) Promote(ctx context.Context, key string) error {
	return c.manual(ctx, "Promote", key, c.loop.Promote)
}

// Demote removes key from the fleet's hot set. If its fleet-wide rate is still above
// PromoteRate, the fleet promotes it again at its next evaluation. It is idempotent.
func (c *Cache[V]) Demote(ctx context.Context, key string) error {
	return c.manual(ctx, "Demote", key, c.loop.Demote)
}

func (c *Cache[V]) manual(ctx context.Context, op, key string, change func(context.Context, string) error) error {
	if err := validKey(key); err != nil {
		return err
	}
	if c.closed.Load() {
		return ErrClosed
	}
	if err := change(ctx, key); err != nil {
		return fmt.Errorf("celebrity: %s %q: %w", op, key, err)
	}
	return nil
}

// Hot returns the keys of the hot set as this instance applies it, sorted.
func (c *Cache[V]) Hot() []string { return c.loop.Hot() }
