// Command driver is a migration driver in a process of its own, for the tests of package
// migrate: it runs one Migrate, Resume or Cancel against real Redis servers and prints the
// outcome as one JSON line. It can stop itself (SIGSTOP) at an exact point, so a test can
// hold it there across another driver's whole run and then let it continue (SIGCONT).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

type result struct {
	State     string `json:"state"`
	Err       string `json:"err,omitempty"`
	Fenced    bool   `json:"fenced"`
	Cancelled bool   `json:"cancelled"`
	Aborted   bool   `json:"aborted"`
}

// stopper stops this process the first time a script call (EVAL, EVALSHA) carries an
// argument equal to arg.
type stopper struct {
	arg  string
	done atomic.Bool
}

func (s *stopper) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *stopper) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.check(cmd)
		return next(ctx, cmd)
	}
}
func (s *stopper) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			s.check(c)
		}
		return next(ctx, cmds)
	}
}
func (s *stopper) check(cmd redis.Cmder) {
	if s.arg == "" || s.done.Load() || !strings.HasPrefix(cmd.Name(), "eval") {
		return
	}
	for _, a := range cmd.Args() {
		if v, ok := a.(string); ok && v == s.arg && s.done.CompareAndSwap(false, true) {
			stop()
			return
		}
	}
}

// stop parks the driver at its stop point: it says so on stdout and waits for a line on
// stdin. The test freezes the process with SIGSTOP meanwhile, then continues it and sends
// the line.
func stop() {
	fmt.Println(`{"stopped":true}`)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

func client(addr string, cluster bool, hooks ...redis.Hook) redis.UniversalClient {
	var c redis.UniversalClient
	if cluster {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addr, ",")})
	} else {
		c = redis.NewClient(&redis.Options{Addr: addr})
	}
	for _, h := range hooks {
		c.AddHook(h)
	}
	return c
}

func main() {
	var (
		control   = flag.String("control", "", "control Redis address (comma-separated for a cluster)")
		ccluster  = flag.Bool("control-cluster", false, "the control Redis is a cluster")
		shards    = flag.String("shards", "", "name=addr[,addr...][/cluster];... shards")
		prefix    = flag.String("prefix", "", "routing prefix")
		op        = flag.String("op", "migrate", "migrate, resume or cancel")
		id        = flag.String("id", "", "migration ID")
		bucket    = flag.Uint("bucket", 0, "bucket unit to move")
		carve     = flag.String("carve", "", "tenant to carve out of its bucket (instead of moving -bucket)")
		fold      = flag.String("fold", "", "overridden tenant to fold back into its bucket (instead of moving -bucket)")
		split     = flag.String("split", "", "tenant to split (instead of moving -bucket); -target names the new spread's shards, comma-separated")
		target    = flag.String("target", "", "target shard")
		lease     = flag.Duration("lease", time.Second, "driver lease")
		stopState = flag.String("stop-at-state", "", "SIGSTOP self right after the journal reaches this state")
		stopArg   = flag.String("stop-before-arg", "", "SIGSTOP self before the first command with this argument")
		batch     = flag.Int("batch", 50, "batch size")
	)
	flag.Parse()
	st := &stopper{arg: *stopArg}
	sc := map[string]migrate.ShardClient{}
	for _, s := range strings.Split(*shards, ";") {
		name, spec, _ := strings.Cut(s, "=")
		addr, kind, _ := strings.Cut(spec, "/")
		sc[name] = client(addr, kind == "cluster", st)
	}
	var stopped atomic.Bool
	o := migrate.Options{Shards: sc, Prefix: *prefix, LeaseTTL: *lease, BatchSize: *batch,
		OnState: func(s migrate.Status) {
			if *stopState != "" && string(s.State) == *stopState && stopped.CompareAndSwap(false, true) {
				stop()
			}
		}}
	co, err := migrate.New(client(*control, *ccluster, st).(migrate.Control), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var s migrate.Status
	switch *op {
	case "migrate":
		if *carve != "" {
			s, err = co.Carve(ctx, migrate.CarveSpec{ID: *id, Tenant: *carve, Target: *target})
			break
		}
		if *split != "" {
			s, err = co.Split(ctx, migrate.SplitSpec{ID: *id, Tenant: *split, Targets: strings.Split(*target, ",")})
			break
		}
		if *fold != "" {
			s, err = co.Fold(ctx, migrate.FoldSpec{ID: *id, Tenant: *fold, Target: *target})
			break
		}
		s, err = co.Migrate(ctx, migrate.Spec{ID: *id, Unit: routing.BucketUnit(uint32(*bucket)), Target: *target})
	case "resume":
		s, err = co.Resume(ctx, *id)
	case "cancel":
		s, err = co.Cancel(ctx, *id)
	}
	r := result{State: string(s.State), Fenced: errors.Is(err, migrate.ErrFenced),
		Cancelled: errors.Is(err, migrate.ErrCancelled), Aborted: errors.Is(err, migrate.ErrAborted)}
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}
