package stripes

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// newFamily returns a Family closed when t ends.
func newFamily(t testing.TB, c Client, o FamilyOptions) *Family {
	t.Helper()
	f, err := NewFamily(c, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// stripesOf returns the stripe count of name's newest generation, read fresh.
func stripesOf(t testing.TB, f *Family, name string) int {
	t.Helper()
	m, err := f.member(name)
	require.NoError(t, err)
	l, err := m.c.loadLayout(context.Background())
	require.NoError(t, err)
	return l.current().Stripes
}

// flipDetector reports names hot at random, changing its mind on every call.
type flipDetector struct{}

func (flipDetector) IsHot(string) bool { return rand.IntN(2) == 0 }

// setDetector reports the names in its set hot.
type setDetector struct {
	mu  sync.Mutex
	hot map[string]bool
}

func (d *setDetector) IsHot(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hot[name]
}

func (d *setDetector) set(name string, hot bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hot[name] = hot
}

func TestFamilyOptionsAreValidated(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	for _, o := range []FamilyOptions{
		{Counter: Options{Name: "x"}},
		{Counter: Options{Stripes: MaxStripes + 1}},
		{MaxNames: -1},
		{IdleAfter: -time.Second},
		{HotStripes: 1},
		{Counter: Options{Stripes: 4}, HotStripes: 3},
		{HotStripes: 4, HotRate: -1},
		{HotStripes: 4, HotRate: 10, CoolRate: 20},
		{CoolAfter: -time.Second},
	} {
		_, err := NewFamily(rc, o)
		require.ErrorIs(t, err, ErrInvalid, "%+v", o)
	}
	f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: celebritytest.NewPrefix(t)}, Interval: -1})
	_, err := f.Add(context.Background(), "bad{name}", Event{ID: "e", Time: time.Now()}, 1)
	require.ErrorIs(t, err, ErrInvalid)
	rs, errs := f.AddBatch(context.Background(), []FamilyAddition{
		{Name: "ok", Event: Event{ID: "e", Time: time.Now()}, Delta: 2},
		{Name: "", Event: Event{ID: "e", Time: time.Now()}, Delta: 1},
	})
	require.NoError(t, errs[0])
	require.True(t, rs[0].Applied)
	require.ErrorIs(t, errs[1], ErrInvalid)
	require.Equal(t, int64(2), mustFamilySum(t, f, "ok"))
}

func mustFamilySum(t testing.TB, f *Family, name string) int64 {
	t.Helper()
	v, err := f.Sum(context.Background(), name)
	require.NoError(t, err)
	return v
}

// TestFamilyColdNameIsOneStripe checks that a new name costs one stripe and that Sum and
// SumMany read it.
func TestFamilyColdNameIsOneStripe(t *testing.T) {
	both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		prefix := celebritytest.NewPrefix(t)
		f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: prefix}, Interval: -1, MaxStaleness: -1})
		var adds []FamilyAddition
		for i := range 50 {
			adds = append(adds, FamilyAddition{Name: fmt.Sprintf("post:%d", i), Event: Event{ID: "v1", Time: time.Now()}, Delta: int64(i + 1)})
		}
		_, errs := f.AddBatch(ctx, adds)
		for _, err := range errs {
			require.NoError(t, err)
		}
		names := make([]string, len(adds))
		for i := range adds {
			names[i] = adds[i].Name
			require.Equal(t, 1, stripesOf(t, f, names[i]))
		}
		sums, errs := f.SumMany(ctx, names)
		for i := range names {
			require.NoError(t, errs[i])
			require.Equal(t, int64(i+1), sums[i])
		}
		// Layout, one stripe and one dedup set per name, plus birth-record keys.
		require.LessOrEqual(t, prefixKeys(t, rc, prefix), 3*len(names)+256)
	})
}

// TestFamilySumCache checks that Sum serves a cached value within MaxStaleness and reads
// again after it.
func TestFamilySumCache(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: celebritytest.NewPrefix(t), Clock: clock}, Interval: -1, MaxStaleness: time.Second})
	_, err := f.Add(ctx, "a", Event{ID: "1", Time: time.Now()}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), mustFamilySum(t, f, "a"))
	_, err = f.Add(ctx, "a", Event{ID: "2", Time: time.Now()}, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), mustFamilySum(t, f, "a"), "cached within MaxStaleness")
	now.Add(int64(time.Second))
	require.Equal(t, int64(2), mustFamilySum(t, f, "a"))
}

// TestFamilyBoundsNamesInMemory checks MaxNames and IdleAfter, and that a dropped name
// with old generations is still sealed by the loop.
func TestFamilyBoundsNamesInMemory(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := context.Background()
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	// Each first Add of a name creates its layout and must reach the stripe within one
	// window of the event's stamp, on a loaded machine too; the seal below is timed by the
	// clock moved two minutes ahead, far past any window this size.
	const window = 2 * time.Second
	f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: celebritytest.NewPrefix(t), DedupWindow: window, Clock: clock},
		Interval: -1, MaxNames: 10, IdleAfter: time.Minute})
	_, err := f.Add(ctx, "resized", Event{ID: "x", Time: time.Now()}, 5)
	require.NoError(t, err)
	_, err = f.Resize(ctx, "resized", 3)
	require.NoError(t, err)
	for i := range 30 {
		_, err := f.Add(ctx, fmt.Sprintf("n%d", i), Event{ID: "x", Time: time.Now()}, 1)
		require.NoError(t, err)
	}
	require.Equal(t, 10, f.Names())
	ahead.Add(int64(2 * time.Minute))
	require.NoError(t, f.Tick(ctx))
	require.Equal(t, 0, f.Names(), "idle names dropped")
	// The dropped name's first generation is sealed by the family's loop.
	c := newCounter(t, rc, Options{Prefix: f.copts.Prefix, Name: "resized", DedupWindow: window})
	require.Eventually(t, func() bool {
		require.NoError(t, f.Tick(ctx))
		l, err := c.loadLayout(ctx)
		require.NoError(t, err)
		return l.isFolded(1)
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(5), mustSum(t, c))
}

// TestFamilyPromotesHotAndDemotesCold checks adaptive striping by measured rate and by a
// detector, with Sum exact across each change.
func TestFamilyPromotesHotAndDemotesCold(t *testing.T) {
	both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		var now atomic.Int64
		now.Store(time.Now().UnixNano())
		clock := func() time.Time { return time.Unix(0, now.Load()) }
		det := &setDetector{hot: map[string]bool{}}
		f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: celebritytest.NewPrefix(t), Clock: clock},
			Interval: -1, MaxStaleness: -1, HotStripes: 8, HotRate: 100, CoolAfter: time.Minute, Detector: det})
		var total int64
		write := func(name string, n int) {
			for i := range n {
				_, err := f.Add(ctx, name, Event{ID: fmt.Sprintf("%s-%d-%d", name, total, i), Time: time.Now()}, 1)
				require.NoError(t, err)
			}
			total += int64(n)
		}
		write("hot", 20)
		write("cold", 1)
		now.Add(int64(100 * time.Millisecond)) // 200 writes/s for "hot", 10 for "cold"
		require.NoError(t, f.Tick(ctx))
		require.Equal(t, 8, stripesOf(t, f, "hot"))
		require.Equal(t, 1, stripesOf(t, f, "cold"))
		// Another process with a small share of the name's writes never saw it hot, so it
		// does not demote it.
		other := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: f.copts.Prefix, Clock: clock},
			Interval: -1, MaxStaleness: -1, HotStripes: 8, HotRate: 100, CoolAfter: time.Second})
		_, err := other.Add(ctx, "hot", Event{ID: "other", Time: time.Now()}, 1)
		require.NoError(t, err)
		total++
		for range 3 {
			now.Add(int64(time.Second))
			require.NoError(t, other.Tick(ctx))
		}
		require.Equal(t, 8, stripesOf(t, other, "hot"))
		det.set("flagged", true)
		write("flagged", 1)
		require.NoError(t, f.Tick(ctx))
		require.Equal(t, 8, stripesOf(t, f, "flagged"), "promoted by the detector")
		require.Equal(t, 8, stripesOf(t, f, "hot"), "cooling, not yet for CoolAfter")
		write("hot", 5)
		now.Add(int64(time.Minute))
		require.NoError(t, f.Tick(ctx))
		require.Equal(t, 1, stripesOf(t, f, "hot"), "demoted after CoolAfter")
		require.Equal(t, 8, stripesOf(t, f, "flagged"), "the detector still reports it")
		st := f.Stats()
		require.Equal(t, [2]uint64{2, 1}, [2]uint64{st.Promotions, st.Demotions}, "hot and flagged promoted, hot demoted")
		require.Zero(t, st.RoundErrors)
		write("hot", 3)
		var got int64
		for _, name := range []string{"hot", "cold", "flagged"} {
			got += mustFamilySum(t, f, name)
		}
		require.Equal(t, total, got)
	})
}

// TestFamilyRetriesAndFailedAddsDoNotPromote checks that the measured write rate counts
// events, not calls: a burst of retries of events already counted (a host replaying its
// outbox after a restart) and calls that failed leave a cold name cold, while the same
// number of new events promotes it.
func TestFamilyRetriesAndFailedAddsDoNotPromote(t *testing.T) {
	both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		var now atomic.Int64
		now.Store(time.Now().UnixNano())
		clock := func() time.Time { return time.Unix(0, now.Load()) }
		f := newFamily(t, rc, FamilyOptions{Counter: Options{Prefix: celebritytest.NewPrefix(t), Clock: clock},
			Interval: -1, MaxStaleness: -1, HotStripes: 8, HotRate: 100})
		at := time.Now()
		ev := func(name string, i int) Event { return Event{ID: fmt.Sprintf("%s-%d", name, i), Time: at} }
		for i := range 5 {
			_, err := f.Add(ctx, "replayed", ev("replayed", i), 1)
			require.NoError(t, err)
		}
		require.NoError(t, f.Tick(ctx)) // the first round only starts the measure
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		for i := range 20 {
			res, err := f.Add(ctx, "replayed", ev("replayed", i%5), 1) // retries
			require.NoError(t, err)
			require.False(t, res.Applied)
			_, err = f.Add(cancelled, "failed", ev("failed", i), 1)
			require.Error(t, err)
		}
		batch := make([]FamilyAddition, 20)
		for i := range batch {
			batch[i] = FamilyAddition{Name: "replayed", Event: ev("replayed", i%5), Delta: 1}
		}
		_, errs := f.AddBatch(ctx, batch)
		for _, err := range errs {
			require.NoError(t, err)
		}
		_, errs = f.AddBatch(cancelled, []FamilyAddition{{Name: "failed", Event: ev("failed", 99), Delta: 1}})
		require.Error(t, errs[0])
		for i := range 20 {
			_, err := f.Add(ctx, "new", ev("new", i), 1)
			require.NoError(t, err)
		}
		now.Add(int64(100 * time.Millisecond)) // 400 calls/s for "replayed", 200 for "failed", 200 events/s for "new"
		require.NoError(t, f.Tick(ctx))
		require.Equal(t, 1, stripesOf(t, f, "replayed"), "retries are not writes")
		failed, err := f.member("failed")
		require.NoError(t, err)
		require.Nil(t, failed.c.layout.Load(), "failed calls are not writes: the name was neither promoted nor created")
		require.Equal(t, 8, stripesOf(t, f, "new"), "new events at the same rate promote")
		require.Equal(t, int64(5), mustFamilySum(t, f, "replayed"))
	})
}

// TestFamilyTwoProcessesExactlyOnce runs two families on separate clients (two processes'
// worth) over the same names, each sending every event (so each event arrives twice), with
// replies dropped after the script ran, retries with the same Event, and both families'
// loops promoting and demoting names at random (TestModelFamily adds sealing).
// Every name's Sum must equal the number of its distinct events.
func TestFamilyTwoProcessesExactlyOnce(t *testing.T) {
	celebritytest.Long(t)
	run := func(t *testing.T, clients [2]redis.UniversalClient, injs [2]*faults.Injector) {
		ctx := context.Background()
		prefix := celebritytest.NewPrefix(t)
		const names, perName, window = 40, 20, 30 * time.Second
		var fams [2]*Family
		for i := range fams {
			loadScripts(t, clients[i])
			fams[i] = newFamily(t, clients[i], FamilyOptions{
				Counter:  Options{Prefix: prefix, DedupWindow: window, SealInterval: 50 * time.Millisecond},
				Interval: 20 * time.Millisecond, MaxStaleness: -1, MaxNames: names / (1 + i), // the second one drops names as it goes
				HotStripes: 4, Detector: flipDetector{}, CoolAfter: time.Millisecond,
			})
		}
		name := func(i int) string { return fmt.Sprintf("post:%d:views", i) }
		// Both processes send the same events: the same ID and Time, as a host retrying a
		// stored event does.
		events := make([]Event, perName)
		var wg sync.WaitGroup
		var applied atomic.Int64
		var mu sync.Mutex
		event := func(k int) Event {
			mu.Lock()
			defer mu.Unlock()
			if events[k].ID == "" {
				events[k] = Event{ID: fmt.Sprintf("v%d", k), Time: time.Now()}
			}
			return events[k]
		}
		for w := range fams {
			f := fams[w]
			wg.Go(func() {
				for k := range perName {
					// Lose the replies of two event scripts (add.lua, loaded, hence EVALSHA
					// with its hash) of this round after they ran.
					injs[w].DropReply(faults.Match{Command: "EVALSHA", Arg: addScript.Hash()}, 2)
					injs[w].DropReply(faults.Match{Command: "EVALSHA", Arg: addFastScript.Hash()}, 2)
					var adds []FamilyAddition
					for i := range names {
						adds = append(adds, FamilyAddition{Name: name(i), Event: event(k), Delta: 1})
					}
					if w == 0 {
						rs, errs := f.AddBatch(ctx, adds)
						for j := range adds {
							res, err := rs[j], errs[j]
							for err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooOld) {
								res, err = f.Add(ctx, adds[j].Name, adds[j].Event, 1)
							}
							if !assert.NoError(t, err) {
								return
							}
							if res.Applied {
								applied.Add(1)
							}
						}
						continue
					}
					for _, a := range adds {
						res, err := f.Add(ctx, a.Name, a.Event, 1)
						for err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooOld) {
							res, err = f.Add(ctx, a.Name, a.Event, 1)
						}
						if !assert.NoError(t, err) {
							return
						}
						if res.Applied {
							applied.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		for i := range names {
			require.Equal(t, int64(perName), mustFamilySum(t, fams[i%2], name(i)), name(i))
		}
		var newest uint64
		for i := range names {
			m, err := fams[0].member(name(i))
			require.NoError(t, err)
			l, err := m.c.loadLayout(ctx)
			require.NoError(t, err)
			newest = max(newest, l.current().Gen)
		}
		require.Greater(t, newest, uint64(2), "promoted and demoted while written")
		require.Positive(t, injs[0].Dropped()+injs[1].Dropped(), "no reply was dropped")
		require.Less(t, applied.Load(), int64(names*perName), "a lost reply's retry reports a duplicate")
		t.Logf("%d replies dropped, %d of %d events reported applied", injs[0].Dropped()+injs[1].Dropped(), applied.Load(), names*perName)
	}
	onTwoLossyClients(t, true, run)
}
