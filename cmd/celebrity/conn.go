package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/admin"
)

// connFlags are the address flags every command that talks to Redis takes.
type connFlags struct {
	addr    string
	cluster string
	json    bool
	// fromEnv names the environment variables the defaults of addr and cluster came from,
	// so that a conflict names the variable the operator did not type.
	fromEnv map[string]string
}

func newFlagSet(e *env, name string, cf *connFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("celebrity "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if cf != nil {
		cf.fromEnv = map[string]string{"addr": e.getenv("CELEBRITY_ADDR"), "cluster": e.getenv("CELEBRITY_CLUSTER")}
		fs.StringVar(&cf.addr, "addr", cf.fromEnv["addr"], "standalone Redis `host:port` (env CELEBRITY_ADDR)")
		fs.StringVar(&cf.cluster, "cluster", cf.fromEnv["cluster"], "Redis Cluster seed `addresses`, comma-separated (env CELEBRITY_CLUSTER)")
		fs.BoolVar(&cf.json, "json", false, "print JSON")
	}
	return fs
}

// parse parses flags wherever they stand among the positional arguments (operators type
// "routes override acme b --yes"), turning flag errors into usage errors. The positional
// arguments are left in fs.Args() in their order; "--" ends flag parsing.
func parse(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return &usageError{"help requested"}
			}
			return &usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

// client connects to the Redis the flags name and checks it answers. Exactly one of --addr
// and --cluster must be given.
func (cf *connFlags) client(ctx context.Context) (redis.UniversalClient, error) {
	var c redis.UniversalClient
	switch {
	case cf.addr != "" && cf.cluster != "":
		return nil, usagef("give --addr or --cluster, not both%s", cf.envNote())
	case cf.addr != "":
		c = redis.NewClient(&redis.Options{Addr: cf.addr, MaxRetries: 1, DialTimeout: 2 * time.Second})
	case cf.cluster != "":
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: splitList(cf.cluster), MaxRetries: 1, DialTimeout: 2 * time.Second})
	default:
		return nil, usagef("no Redis address: give --addr host:port or --cluster h1:p1,... (or set CELEBRITY_ADDR / CELEBRITY_CLUSTER)")
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %w", cf.where(), err)
	}
	return c, nil
}

// envNote names the environment variables that set the address flags in a conflict, with
// how to override them: the operator typed one address and the environment gave the other.
func (cf *connFlags) envNote() string {
	var notes []string
	for _, f := range []struct{ flag, env, val string }{
		{"addr", "CELEBRITY_ADDR", cf.addr}, {"cluster", "CELEBRITY_CLUSTER", cf.cluster},
	} {
		if env := cf.fromEnv[f.flag]; env != "" && env == f.val {
			notes = append(notes, fmt.Sprintf("--%s comes from %s=%s; unset it or pass --%s ''", f.flag, f.env, env, f.flag))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

func (cf *connFlags) where() string {
	if cf.addr != "" {
		return cf.addr
	}
	return cf.cluster
}

// masters returns one standalone client per master: the server itself, or every master of
// the cluster. The caller closes them.
func masters(ctx context.Context, c redis.UniversalClient) ([]*redis.Client, error) {
	switch c := c.(type) {
	case *redis.Client:
		return []*redis.Client{redis.NewClient(c.Options())}, nil
	case *redis.ClusterClient:
		var mu sync.Mutex
		var out []*redis.Client
		err := c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			o := *m.Options()
			out = append(out, redis.NewClient(&o))
			return nil
		})
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("list cluster masters: %w", err)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Options().Addr < out[j].Options().Addr })
		return out, nil
	}
	return nil, fmt.Errorf("unsupported client %T", c)
}

func closeAll[T io.Closer](cs []T) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// printJSON writes v as one line of JSON in the shape the admin handler serves
// (admin.Shape: snake_case keys, durations and errors as text), so that a field reads the
// same in the CLI's --json and on a service's admin port.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(admin.Shape(v))
}
