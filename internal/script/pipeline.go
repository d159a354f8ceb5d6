package script

import (
	"context"
	"time"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/redis/go-redis/v9"
)

// Client is what Pipeline needs of a go-redis client. *redis.Client, *redis.ClusterClient
// and redis.UniversalClient satisfy it.
type Client interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = redis.UniversalClient(nil)
)

// Call is one script call of a pipeline.
type Call struct {
	// Script is the script to run.
	Script *Script
	// Keys and Args are its KEYS and ARGV.
	Keys []string
	Args []any
	// ReadOnly sends the call as EVALSHA_RO.
	ReadOnly bool
}

// Pipeline sends calls in one pipeline (on a cluster, one per master, at once) with EVALSHA
// and returns one command per call, in order; each holds its own reply or error. A call
// answered NOSCRIPT did not run: Pipeline sends those calls once more, in a second pipeline,
// with EVAL (or EVAL_RO) and the script's source, which also caches the script on that
// server; so every call runs at most once, and no SCRIPT LOAD permission is needed. The
// error is always nil; the calls' own errors are in their commands. Pipeline returns by ctx's
// deadline or cancellation whatever the client's options (see package bound): each command
// then holds ctx's error, and the calls may still run (lost replies).
func Pipeline(ctx context.Context, c Client, calls []Call) ([]*redis.Cmd, error) {
	return boundedPipeline(ctx, calls, func() []*redis.Cmd { return pipeline(ctx, c, calls, nil) }), nil
}

// boundedPipeline runs one pipeline of calls through bound.Call: when the wait ctx ended,
// every command holds ctx's error.
func boundedPipeline(ctx context.Context, calls []Call, run func() []*redis.Cmd) []*redis.Cmd {
	cmds, err := bound.Call(ctx, func() ([]*redis.Cmd, error) { return run(), nil }, nil)
	if err != nil {
		return failed(ctx, calls, err)
	}
	return cmds
}

// failed returns one command per call, each holding err.
func failed(ctx context.Context, calls []Call, err error) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	for i, call := range calls {
		cmds[i] = redis.NewCmd(ctx, "evalsha", call.Script.Hash())
		cmds[i].SetErr(err)
	}
	return cmds
}

// PipelineWait is Pipeline on the one server behind c (a client of one node, never a
// cluster client: WAIT must run on the connection that wrote) with a WAIT numReplicas
// timeout after the calls in the same pipeline; when calls are sent again with their
// sources, a second WAIT follows them. It returns the calls' commands and the last WAIT's.
func PipelineWait(ctx context.Context, c Client, calls []Call, numReplicas int, timeout time.Duration) ([]*redis.Cmd, *redis.IntCmd) {
	type sent struct {
		cmds []*redis.Cmd
		wait *redis.IntCmd
	}
	r, err := bound.Call(ctx, func() (sent, error) {
		var wait *redis.IntCmd
		then := func(p redis.Pipeliner) {
			wait = redis.NewIntCmd(ctx, "wait", numReplicas, timeout.Milliseconds())
			_ = p.Process(ctx, wait)
		}
		cmds := pipeline(ctx, c, calls, then)
		return sent{cmds, wait}, nil
	}, nil)
	if err != nil {
		r.cmds = failed(ctx, calls, err)
		r.wait = redis.NewIntCmd(ctx, "wait", numReplicas, timeout.Milliseconds())
		r.wait.SetErr(err)
	}
	return r.cmds, r.wait
}

// pipeline sends calls, then (when not nil) queues its commands after them in each pipeline
// it sends.
func pipeline(ctx context.Context, c Client, calls []Call, then func(redis.Pipeliner)) []*redis.Cmd {
	cmds := send(ctx, c, calls, nil, then)
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	retried := sendSource(ctx, c, calls, again, then)
	for k, i := range again {
		cmds[i] = retried[k]
	}
	return cmds
}

// send queues calls (only those at the positions in only, when it is not nil) in one
// pipeline, then then's commands, and runs it. The pipeline's own error is also each failed
// command's, so it is not returned.
func send(ctx context.Context, c Client, calls []Call, only []int, then func(redis.Pipeliner)) []*redis.Cmd {
	if only == nil {
		only = make([]int, len(calls))
		for i := range only {
			only[i] = i
		}
	}
	p := c.Pipeline()
	cmds := make([]*redis.Cmd, len(only))
	for k, i := range only {
		call := calls[i]
		if call.ReadOnly {
			cmds[k] = p.EvalShaRO(ctx, call.Script.Hash(), call.Keys, call.Args...)
		} else {
			cmds[k] = p.EvalSha(ctx, call.Script.Hash(), call.Keys, call.Args...)
		}
	}
	if then != nil {
		then(p)
	}
	_, _ = p.Exec(ctx)
	return cmds
}

// sendSource queues the calls at the positions in only with EVAL (EVAL_RO), the scripts'
// sources in place of their hashes, in one pipeline, then then's commands, and runs it.
func sendSource(ctx context.Context, c Client, calls []Call, only []int, then func(redis.Pipeliner)) []*redis.Cmd {
	p := c.Pipeline()
	cmds := make([]*redis.Cmd, len(only))
	for k, i := range only {
		call := calls[i]
		if call.ReadOnly {
			cmds[k] = p.EvalRO(ctx, call.Script.src, call.Keys, call.Args...)
		} else {
			cmds[k] = p.Eval(ctx, call.Script.src, call.Keys, call.Args...)
		}
	}
	if then != nil {
		then(p)
	}
	_, _ = p.Exec(ctx)
	return cmds
}
