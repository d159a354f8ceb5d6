// Command celebrity is the operator's tool for the celebrity library: it shows which Redis
// node is hot and how skewed the cluster is, reads and changes route tables, and inspects
// the library's state in Redis. Every command prints plain text for a person, or JSON with
// --json; addresses come from flags or from CELEBRITY_ADDR / CELEBRITY_CLUSTER.
//
// Exit codes: 0 success, 1 the command failed (Redis unreachable, a refused change),
// 2 bad usage or bad input (nothing was changed).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// env is what a command runs with: its streams, the environment and a cancellable context.
type env struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// command is one subcommand: a name, a one-line summary and its entry point.
type command struct {
	name    string
	summary string
	run     func(e *env, args []string) error
}

func commands() []command {
	return []command{
		{"top", "live per-node ops/s and skew (max/mean), the Cache fleet's hot set; --once prints one sample", runTop},
		{"routes", "show | diff | init | override | spread | publish route tables", runRoutes},
		{"escrow", "audit | holders | recover | reconcile a permit pool", runEscrow},
		{"migrate", "start | status | watch | resume | cancel | list durable moves", runMigrate},
		{"stripes", "sum | status | resize | seal a striped counter", runStripes},
		{"plan", "per-shard skew and per-tenant load (the Routers' summary, or the change logs); proposes moves as commands, runs nothing", runPlan},
		{"ratelimit", "status: a key's use of its limit in the current window", runRatelimit},
	}
}

// usageError marks bad usage or input: exit code 2, nothing changed.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func main() {
	// go-redis logs its internals (connection pool, maintenance notifications) through a
	// package-level logger to stderr; an operator's tool reports the errors it returns, and
	// nothing else.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := &env{ctx: ctx, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	code := run(e, os.Args[1:])
	stop()
	os.Exit(code)
}

// quietLogger drops go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// run dispatches args to a command and maps its error to an exit code.
func run(e *env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return exitCode(e, c.run(e, args[1:]))
		}
	}
	fmt.Fprintf(e.stderr, "celebrity: unknown command %q\n", args[0])
	usage(e.stderr)
	return 2
}

func exitCode(e *env, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(e.stderr, "celebrity: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: celebrity <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\naddresses: --addr host:port (standalone) or --cluster h1:p1,h2:p2 (Redis Cluster);")
	fmt.Fprintln(w, "defaults from CELEBRITY_ADDR and CELEBRITY_CLUSTER. Every command accepts --json.")
	fmt.Fprintln(w, "Run 'celebrity <command> -h' for its flags.")
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
