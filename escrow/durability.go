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

// checkDurability reads maxmemory-policy and the AOF settings from every master the client
// reaches. A policy that could evict ledger keys is refused unless allowEviction is set; a
// server without appendonly yes and appendfsync always, or one that refuses CONFIG GET
// (managed Redis often renames or forbids it), is refused unless allowWeak is set, in which
// case it is logged as a warning.
func checkDurability(ctx context.Context, c Client, logger *slog.Logger, allowEviction, allowWeak bool) error {
	var (
		mu   sync.Mutex
		errs []error
	)
	weak := func(addr, why string, args ...any) {
		if allowWeak {
			if logger != nil {
				logger.Warn("escrow: "+why, append([]any{"addr", addr}, args...)...)
			}
			return
		}
		mu.Lock()
		errs = append(errs, fmt.Errorf("%w: %s: %s (set AllowWeakDurability to accept it) %v", ErrWeakDurability, addr, why, args))
		mu.Unlock()
	}
	check := func(ctx context.Context, node Client, addr string) error {
		cfg, err := node.ConfigGet(ctx, "*").Result()
		if err != nil {
			var rerr redis.Error
			if errors.As(err, &rerr) {
				weak(addr, "CONFIG GET refused; durability settings not checked", "err", err)
				return nil
			}
			return fmt.Errorf("escrow: CONFIG GET on %s: %w", addr, err)
		}
		policy := cfg["maxmemory-policy"]
		if policy != "" && !evictionSafe[policy] && !allowEviction {
			mu.Lock()
			errs = append(errs, fmt.Errorf("%w: %s has maxmemory-policy %q (use noeviction or a volatile-* policy, or set AllowEviction)",
				ErrUnsafeEviction, addr, policy))
			mu.Unlock()
		}
		if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
			weak(addr, "strict mode assumes appendonly yes and appendfsync always",
				"appendonly", cfg["appendonly"], "appendfsync", cfg["appendfsync"])
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
