// Package script runs the packages' Lua scripts: one at a time through EVALSHA with an EVAL
// fallback (go-redis's Script.Run), or many in one pipeline, where a command answered
// NOSCRIPT cannot fall back by itself: Pipeline loads its script on every master and sends
// it again.
//
// The packages follow one layout: each script is a file name.lua, embedded as nameLua and
// run as nameScript:
//
//	//go:embed acquire.lua
//	var acquireLua string
//	var acquireScript = script.New(acquireLua)
package script

import (
	"context"
	"fmt"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/redis/go-redis/v9"
)

// Script is one Lua script. It is immutable and safe for concurrent use.
type Script struct {
	src string
	rs  *redis.Script
}

// New returns the script with source src.
func New(src string) *Script {
	return &Script{src: src, rs: redis.NewScript(src)}
}

// Source returns the script's Lua source, which EVAL runs.
func (s *Script) Source() string { return s.src }

// Hash returns the script's SHA1, the name EVALSHA runs it by.
func (s *Script) Hash() string { return s.rs.Hash() }

// Run runs the script with EVALSHA, and with EVAL when the server answers NOSCRIPT. It
// returns by ctx's deadline or cancellation whatever the client's options (see package
// bound): the command then holds ctx's error, and the script may still run (a lost reply).
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return bounded(ctx, s, func() *redis.Cmd { return s.rs.Run(ctx, c, keys, args...) })
}

// RunRO is Run for a read-only script (EVALSHA_RO, EVAL_RO), which a cluster client may send
// to a replica when it routes reads there.
func (s *Script) RunRO(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return bounded(ctx, s, func() *redis.Cmd { return s.rs.RunRO(ctx, c, keys, args...) })
}

// bounded runs one call of s through bound.Call: a command whose wait ctx ended holds ctx's
// error.
func bounded(ctx context.Context, s *Script, run func() *redis.Cmd) *redis.Cmd {
	cmd, err := bound.Call(ctx, func() (*redis.Cmd, error) { return run(), nil }, nil)
	if err != nil {
		cmd = redis.NewCmd(ctx, "evalsha", s.Hash())
		cmd.SetErr(err)
	}
	return cmd
}

// Load loads scripts on every master behind c: each master of a *redis.ClusterClient, or the
// one server of any other client. A script loaded this way runs by EVALSHA until the
// server's script cache is flushed or a replica without it is promoted.
func Load(ctx context.Context, c redis.Scripter, scripts ...*Script) error {
	load := func(ctx context.Context, node redis.Scripter) error {
		for _, s := range scripts {
			if err := s.rs.Load(ctx, node).Err(); err != nil {
				return fmt.Errorf("script: load %s: %w", s.Hash(), err)
			}
		}
		return nil
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) })
	}
	return load(ctx, c)
}
