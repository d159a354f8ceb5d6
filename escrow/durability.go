package escrow

import (
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
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
	d := &durabilityCheck{logger: logger, allowEviction: allowEviction, allowWeak: allowWeak}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		_, err = bound.Do(ctx, func() (struct{}, error) {
			return struct{}{}, cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
				return d.node(ctx, node, node.Options().Addr)
			})
		})
	} else {
		addr := "server"
		if rc, ok := c.(*redis.Client); ok {
			addr = rc.Options().Addr
		}
		_, err = bound.Do(ctx, func() (struct{}, error) { return struct{}{}, d.node(ctx, c, addr) })
	}
	if err != nil {
		return err
	}
	return errors.Join(d.errs...)
}

// durabilityCheck collects the findings of checkDurability across masters, which
// ForEachMaster visits concurrently.
type durabilityCheck struct {
	logger                   *slog.Logger
	allowEviction, allowWeak bool
	mu                       sync.Mutex
	errs                     []error
}

// node reads the settings of one server and judges them.
func (d *durabilityCheck) node(ctx context.Context, node Client, addr string) error {
	cfg, err := node.ConfigGet(ctx, "*").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			d.weak(addr, "CONFIG GET refused; durability settings not checked", "err", err)
			return nil
		}
		return fmt.Errorf("escrow: CONFIG GET on %s: %w", addr, err)
	}
	evicts, durable := judgeConfig(cfg)
	if evicts && !d.allowEviction {
		d.fail(fmt.Errorf("%w: %s has maxmemory-policy %q (use noeviction or a volatile-* policy, or set AllowEviction)",
			ErrUnsafeEviction, addr, cfg["maxmemory-policy"]))
	}
	if !durable {
		d.weak(addr, "strict mode assumes appendonly yes and appendfsync always",
			"appendonly", cfg["appendonly"], "appendfsync", cfg["appendfsync"])
	}
	return nil
}

// judgeConfig tells, from a server's CONFIG GET, whether its maxmemory-policy may evict
// ledger keys and whether it keeps every acknowledged write (pure: tested without Redis).
func judgeConfig(cfg map[string]string) (evicts, durable bool) {
	policy := cfg["maxmemory-policy"]
	return policy != "" && !evictionSafe[policy], cfg["appendonly"] == "yes" && cfg["appendfsync"] == "always"
}

// weak records a server that may lose acknowledged writes: a warning when allowWeak is set,
// an ErrWeakDurability otherwise.
func (d *durabilityCheck) weak(addr, why string, args ...any) {
	if d.allowWeak {
		if d.logger != nil {
			d.logger.Warn("escrow: "+why, append([]any{"addr", addr}, args...)...)
		}
		return
	}
	d.fail(fmt.Errorf("%w: %s: %s (set AllowWeakDurability to accept it) %v", ErrWeakDurability, addr, why, args))
}

// fail records a finding that makes Init fail.
func (d *durabilityCheck) fail(err error) {
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
}
