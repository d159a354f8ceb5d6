package replicas_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/testkit"
	"github.com/celebrity-go/celebrity/replicas"
)

// countingSource is a BatchLoader's source that has every key but missing, counts the loads
// of each key, and takes delay per query.
type countingSource struct {
	missing string
	delay   time.Duration
	mu      sync.Mutex
	loads   map[string]int
}

func (s *countingSource) load(_ context.Context, keys []string) (map[string]replicas.Item, error) {
	out := map[string]replicas.Item{}
	s.mu.Lock()
	for _, k := range keys {
		s.loads[k]++
		if k != s.missing {
			out[k] = replicas.Item{Value: []byte("body:" + k), Version: 1}
		}
	}
	s.mu.Unlock()
	time.Sleep(s.delay)
	return out, nil
}

// missingKeyWave has 8 goroutines on each of reps ask, all at once and rounds times each,
// for batches of 4 present keys and the missing one, from a fresh key set under prefix; it
// checks every answer and returns the source's loads by key.
func missingKeyWave(t *testing.T, reps []*replicas.Replicator, prefix string, rounds int) map[string]int {
	t.Helper()
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("%spost:%d", prefix, i)
	}
	present := append(append([]string(nil), keys[:7]...), keys[8:]...)
	src := &countingSource{missing: keys[7], delay: 5 * time.Millisecond, loads: map[string]int{}}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 * len(reps) {
		wg.Go(func() {
			<-start
			for round := range rounds {
				batch := []string{keys[7]}
				for j := range 4 {
					batch = append(batch, present[(i+round+3*j)%len(present)])
				}
				items, errs, err := reps[i%len(reps)].GetOrLoadMany(testkit.Ctx(t), batch, time.Minute, src.load)
				if err != nil {
					t.Error(err)
					return
				}
				for _, k := range batch {
					switch {
					case k == keys[7] && !errorsIsNotFound(errs[k]):
						t.Errorf("%s: %v, want ErrNotFound", k, errs[k])
					case k != keys[7] && (errs[k] != nil || string(items[k].Value) != "body:"+k):
						t.Errorf("%s: %q, %v", k, items[k].Value, errs[k])
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	src.mu.Lock()
	defer src.mu.Unlock()
	return src.loads
}

// TestGetOrLoadManyLoadsAMissingKeyOncePerNegativeTTL: two instances, eight goroutines each,
// ask over and over for batches that hold a key the source does not have and keys it has.
// Within NegativeTTL the missing key reaches the source once for the fleet, as every present
// key does: the holder's absent record answers the waiters woken by its release and every
// later caller, and no waiter takes the lease again. Also with go-redis retrying the lease
// commands and releases whose replies were lost after they ran.
func TestGetOrLoadManyLoadsAMissingKeyOncePerNegativeTTL(t *testing.T) {
	s := celebritytest.Standalone(t)
	for _, lost := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "lost-replies"}[lost], func(t *testing.T) {
			inj := faults.New()
			o := replicas.Options{Prefix: celebritytest.NewPrefix(t), NegativeTTL: time.Minute}
			reps := []*replicas.Replicator{
				newReplicator(t, s.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) }), o),
				newReplicator(t, s.Client(t), o),
			}
			for wave := range 5 {
				if lost {
					inj.DropReply(faults.Match{Command: "SET", Arg: "l2,"}, 3)
					inj.DropReply(faults.Match{Command: "EVALSHA", Arg: replicas.ReleaseScript[0]}, 1)
				}
				prefix := fmt.Sprintf("%swave%d:", celebritytest.NewPrefix(t), wave)
				for k, n := range missingKeyWave(t, reps, prefix, 4) {
					require.Equal(t, 1, n, "loads of %s (wave %d); stats %+v / %+v", k, wave, reps[0].Stats(), reps[1].Stats())
				}
			}
			if lost {
				require.Positive(t, inj.Dropped(), "replies were lost")
			}
			for _, r := range reps {
				require.Zero(t, r.Stats().LeaseTakeovers, "no lease was left to run out")
			}
		})
	}
}

// holdAfterLease is a go-redis hook that, once armed, holds the first lease command to
// return (a plain SET "l2,…", alone or in a pipeline, after go-redis's own retries) before
// its caller sees the reply, until go is closed.
type holdAfterLease struct {
	armed atomic.Bool
	held  chan struct{} // closed when the command is held
	go_   chan struct{}
}

func newHoldAfterLease() *holdAfterLease {
	return &holdAfterLease{held: make(chan struct{}), go_: make(chan struct{})}
}

func (h *holdAfterLease) hold(cmds []redis.Cmder) {
	for _, c := range cmds {
		if a := c.Args(); c.Name() == "set" && len(a) > 2 && strings.HasPrefix(fmt.Sprint(a[2]), "l2,") &&
			h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.go_
			return
		}
	}
}

func (h *holdAfterLease) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdAfterLease) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.hold([]redis.Cmder{cmd})
		return err
	}
}
func (h *holdAfterLease) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.hold(cmds)
		return err
	}
}

// TestRetriedLeaseCommandKeepsItsLease: the reply of a caller's lease command is lost after
// the command took the lease, and go-redis sends it again, which finds the caller's own
// marker; meanwhile a second caller on the instance found that marker and waits for its
// holder. The first caller must load and fill under its lease (once), not join the waiting
// fetch: that fetch waits for the first caller, and the lease would be left to run out
// (a minute here) before anyone loads. For GetOrLoad and GetOrLoadMany.
func TestRetriedLeaseCommandKeepsItsLease(t *testing.T) {
	s := celebritytest.Standalone(t)
	for _, many := range []bool{false, true} {
		t.Run(map[bool]string{false: "GetOrLoad", true: "GetOrLoadMany"}[many], func(t *testing.T) {
			inj, hook := faults.New(), newHoldAfterLease()
			c := s.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
			c.AddHook(hook)
			r := newReplicator(t, c, replicas.Options{LeaseTTL: time.Minute})
			key := celebritytest.NewPrefix(t) + "post:7"
			var loads atomic.Int64
			load := func(_ context.Context, keys []string) (map[string]replicas.Item, error) {
				loads.Add(1)
				return map[string]replicas.Item{key: {Value: []byte("v1"), Version: 1}}, nil
			}
			get := func() (replicas.Item, error) {
				if !many {
					return r.GetOrLoad(testkit.Ctx(t), key, time.Minute, func(ctx context.Context, k string) (replicas.Item, error) {
						items, err := load(ctx, []string{k})
						return items[k], err
					})
				}
				items, errs, err := r.GetOrLoadMany(testkit.Ctx(t), []string{key}, time.Minute, load)
				if err == nil {
					err = errs[key]
				}
				return items[key], err
			}
			type result struct {
				it  replicas.Item
				err error
			}
			first, second := make(chan result, 1), make(chan result, 1)
			inj.DropReply(faults.Match{Command: "SET", Arg: "l2,"}, 1)
			hook.armed.Store(true)
			go func() { it, err := get(); first <- result{it, err} }()
			<-hook.held
			require.EqualValues(t, 1, inj.Dropped(), "the lease command's first reply was lost")
			go func() { it, err := get(); second <- result{it, err} }()
			require.Eventually(t, func() bool { return r.Stats().LeaseWaits == 1 }, 20*time.Second, time.Millisecond,
				"the second caller waits for the lease's holder")
			close(hook.go_)
			for _, ch := range []chan result{first, second} {
				res := <-ch
				require.NoError(t, res.err)
				require.Equal(t, replicas.Item{Value: []byte("v1"), Version: 1}, res.it)
			}
			require.EqualValues(t, 1, loads.Load())
			require.Zero(t, r.Stats().LeaseTakeovers, "nobody waited for the lease to run out")
		})
	}
}
