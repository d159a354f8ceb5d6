package escrow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// evictionSafe lists the maxmemory policies that can never delete a ledger key. Ledger keys
// have no TTL, so the volatile-* policies, which only evict keys with a TTL, leave them alone.
var evictionSafe = map[string]bool{
	"noeviction":      true,
	"volatile-lru":    true,
	"volatile-lfu":    true,
	"volatile-random": true,
	"volatile-ttl":    true,
}

// checkDurability reads maxmemory-policy (and the AOF settings, for a warning) from every
// master the client reaches. A policy that could evict ledger keys is refused unless allow is
// set. A server that refuses CONFIG GET (managed Redis often renames or forbids it) is
// tolerated with a warning: the check is then the operator's duty.
func checkDurability(ctx context.Context, c Client, logger *slog.Logger, allow bool) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	check := func(ctx context.Context, node Client, addr string) error {
		cfg, err := node.ConfigGet(ctx, "*").Result()
		if err != nil {
			var rerr redis.Error
			if errors.As(err, &rerr) {
				if logger != nil {
					logger.Warn("escrow: CONFIG GET refused; durability settings not checked",
						"addr", addr, "err", err)
				}
				return nil
			}
			return fmt.Errorf("escrow: CONFIG GET on %s: %w", addr, err)
		}
		policy := cfg["maxmemory-policy"]
		if policy != "" && !evictionSafe[policy] && !allow {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%w: %s has maxmemory-policy %q (use noeviction or a volatile-* policy, or set AllowEviction)",
				ErrUnsafeEviction, addr, policy))
			mu.Unlock()
		}
		if logger != nil && (cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always") {
			logger.Warn("escrow: strict mode assumes appendonly yes and appendfsync always",
				"addr", addr, "appendonly", cfg["appendonly"], "appendfsync", cfg["appendfsync"])
		}
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return check(ctx, node, node.Options().Addr)
		})
	} else {
		addr := "server"
		if rc, ok := c.(*redis.Client); ok {
			addr = rc.Options().Addr
		}
		err = check(ctx, c, addr)
	}
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}
