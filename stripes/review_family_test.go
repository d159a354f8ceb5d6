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
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// A resizer that stopped after closing the old generation (the new one still pending)
// leaves events counted in the pending generation's stripes. If such a stripe is lost, the
// next Seal or Resize finishing the resize must not create it again from zero: the events
// it held would be lost and their retries counted again.
func TestReviewLostPendingStripeIsNotRecreated(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := context.Background()
		c := newCounter(t, rc, Options{Stripes: 1})
		require.Zero(t, mustSum(t, c))
		announce(t, c, 1)
		l := mustLayout(t, c)
		next := l.doc.Gens[1]
		require.NoError(t, c.createStripes(ctx, &next))
		_, err := c.pipeline(ctx, closeScript, 1, func(i int) (string, []any) {
			return c.keys.stripe(l.doc.Gens[0].Tags[i], 1, i), []any{1, next.Start}
		})
		require.NoError(t, err)
		ev := Event{ID: "in-pending", Time: time.UnixMilli(next.Start + 10)}
		res, err := c.Add(ctx, ev, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, uint64(2), res.Gen)
		// The stripe's master loses it: the stripe hash and its dedup sets.
		key := c.keys.stripe(next.Tags[0], 2, 0)
		node := nodeFor(t, rc, key)
		lost, err := node.Keys(ctx, key+"*").Result()
		require.NoError(t, err)
		require.NoError(t, node.Del(ctx, lost...).Err())

		_, err = c.Seal(ctx) // would finish the resize
		require.ErrorIs(t, err, ErrVanished, "Seal finishing the resize")
		_, err = c.Resize(ctx, 3)
		require.ErrorIs(t, err, ErrVanished, "Resize finishing the resize")
		_, err = c.Sum(ctx)
		require.ErrorIs(t, err, ErrVanished, "Sum after a stripe holding a counted event was lost")
		res, err = c.Add(ctx, ev, 1)
		require.ErrorIs(t, err, ErrVanished, "a retry of the lost stripe's event")
		require.False(t, res.Applied)
		n, err := node.Exists(ctx, key).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the lost stripe was not created again")
	})
}

// familyPair returns two families (two processes' worth: separate clients, each with its
// own fault injector and maxRetries go-redis retries) on one prefix, on the shared
// standalone server or the shared cluster.
func familyPair(t *testing.T, cluster bool, maxRetries int, o FamilyOptions) ([2]*Family, [2]*faults.Injector) {
	t.Helper()
	o.Counter.Prefix = celebritytest.Prefix(t)
	var fams [2]*Family
	var injs [2]*faults.Injector
	for i := range fams {
		injs[i] = faults.New()
		var rc redis.UniversalClient
		if cluster {
			rc = celebritytest.SharedCluster(t).Client(t, func(co *redis.ClusterOptions) {
				co.Dialer, co.MaxRetries = injs[i].Dialer(nil), maxRetries
				if maxRetries < 0 {
					co.MaxRedirects = -1 // the cluster client's own retry loop
				}
			})
		} else {
			rc = celebritytest.Standalone(t).Client(t, func(co *redis.Options) { co.Dialer, co.MaxRetries = injs[i].Dialer(nil), maxRetries })
		}
		loadScripts(t, rc)
		fams[i] = newFamily(t, rc, o)
	}
	return fams, injs
}

// eventLog records, per event, how many attempts reported Applied and whether one
// succeeded, for the exactly-once checks.
type eventLog struct {
	mu      sync.Mutex
	applied map[string]int // name + "/" + ID -> attempts that reported Applied
	acked   map[string]int64
	gen     map[string]uint64
	// tooOldOK accepts ErrTooOld as the end of an event's attempts (counted in tooOld).
	tooOldOK bool
	tooOld   atomic.Int64
}

func newEventLog() *eventLog {
	return &eventLog{applied: map[string]int{}, acked: map[string]int64{}, gen: map[string]uint64{}}
}

// note records one successful attempt of ev in name; it fails t if the event was reported
// in two generations.
func (l *eventLog) note(t *testing.T, name string, ev Event, res Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := name + "/" + ev.ID
	if g, ok := l.gen[k]; ok && g != res.Gen {
		t.Errorf("%s: attempts placed in generations %d and %d", k, g, res.Gen)
	}
	if _, ok := l.gen[k]; !ok {
		l.acked[name]++
	}
	l.gen[k] = res.Gen
	if res.Applied {
		l.applied[k]++
		if l.applied[k] > 1 {
			t.Errorf("%s: reported Applied %d times", k, l.applied[k])
		}
	}
}

// addUntilDone adds ev to name through f, retrying with the same Event until an attempt
// succeeds; it returns false (after reporting) on an error a retry cannot fix. Once
// log.tooOldOK is set, ErrTooOld ends the attempts (the event is counted once or never).
func addUntilDone(t *testing.T, f *Family, log *eventLog, name string, ev Event, batch bool) bool {
	for range 100 {
		var res Result
		var err error
		if batch {
			rs, errs := f.AddBatch(context.Background(), []FamilyAddition{{Name: name, Event: ev, Delta: 1}})
			res, err = rs[0], errs[0]
		} else {
			res, err = f.Add(context.Background(), name, ev, 1)
		}
		if err == nil {
			log.note(t, name, ev, res)
			return true
		}
		if errors.Is(err, ErrTooOld) && log.tooOldOK {
			log.tooOld.Add(1)
			return true
		}
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooOld) || errors.Is(err, ErrLayout) {
			t.Errorf("%s %s: %v", name, ev.ID, err)
			return false
		}
	}
	t.Errorf("%s %s: no attempt succeeded", name, ev.ID)
	return false
}

// Two families (two processes) race to promote and demote the same names, by hand and by
// their loops, while writers on both add events and retry each through the other family
// (same ID and Time), with replies of scripts (adds, layout compare-and-sets, stripe
// creation and closing) lost after they ran. A third family read the layouts before the
// race and retries every event, and adds new ones, through those layouts, many generations
// old. Every event is reported Applied at most once and always in one generation, and
// every Sum equals the number of distinct acknowledged events.
// With go-redis retries (the default 3), a lost reply is retried inside the client; without
// them (-1), every lost reply reaches the family: a Resize stops half way and the next one
// finishes it.
func TestReviewFamilyTwoInstancesResizeRaceWithCrossRetries(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		for _, retries := range []int{3, -1} {
			t.Run(fmt.Sprintf("%s/retries=%d", map[bool]string{false: "standalone", true: "cluster"}[cluster], retries), func(t *testing.T) {
				reviewResizeRace(t, cluster, retries)
			})
		}
	}
}

func reviewResizeRace(t *testing.T, cluster bool, maxRetries int) {
	names := []string{"hot:0", "hot:1", "hot:2"}
	o := FamilyOptions{Counter: Options{DedupWindow: 30 * time.Second}, Interval: -1, MaxStaleness: -1,
		HotStripes: 6, Detector: flipDetector{}, CoolAfter: time.Nanosecond}
	fams, injs := familyPair(t, cluster, maxRetries, o)
	o.Counter.Prefix = fams[0].copts.Prefix
	var rc redis.UniversalClient = celebritytest.Standalone(t).Client(t)
	if cluster {
		rc = celebritytest.SharedCluster(t).Client(t)
	}
	stale := newFamily(t, rc, o)
	log := newEventLog()
	old := map[string]*layout{}
	events := map[string][]Event{}
	for _, n := range names {
		ev := Event{ID: "stale-pre", Time: time.Now()}
		require.True(t, addUntilDone(t, stale, log, n, ev, false))
		events[n] = append(events[n], ev)
		m, err := stale.member(n)
		require.NoError(t, err)
		old[n] = m.c.layout.Load()
	}
	var done atomic.Bool
	var resizes, resizeErrs atomic.Int64
	var rg sync.WaitGroup
	for i := range fams {
		rg.Go(func() { raceResizes(t, fams[i], injs[i], names, &done, &resizes, &resizeErrs) })
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		own, other := fams[w%2], fams[1-w%2]
		wg.Go(func() {
			for k := range 60 {
				n, ev := names[(w+k)%len(names)], Event{ID: fmt.Sprintf("w%d-%d", w, k), Time: time.Now()}
				if !addUntilDone(t, own, log, n, ev, k%2 == 0) || !addUntilDone(t, other, log, n, ev, k%3 == 0) ||
					!addUntilDone(t, own, log, n, ev, false) {
					return
				}
				mu.Lock()
				events[n] = append(events[n], ev)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	done.Store(true)
	rg.Wait()
	for _, in := range injs {
		in.Clear()
	}
	staleRetries(t, stale, log, old, events)
	newest := uint64(0)
	for _, n := range names {
		for _, f := range []*Family{fams[0], fams[1], stale} {
			require.Equal(t, log.acked[n], mustFamilySum(t, f, n), "Sum of %s", n)
		}
		newest = max(newest, mustLayout(t, fams[0].names[n].Value.(*familyMember).c).current().Gen)
	}
	t.Logf("%d resizes (%d failed attempts), newest generation %d, %d+%d replies dropped, %d events acknowledged",
		resizes.Load(), resizeErrs.Load(), newest, injs[0].Dropped(), injs[1].Dropped(), len(log.gen))
	require.Greater(t, newest, uint64(4), "the names changed generation under the writers")
	require.Positive(t, injs[0].Dropped()+injs[1].Dropped(), "replies were lost")
}

// raceResizes promotes, demotes and ticks f over names until done, losing the reply of one
// script (of any actor on f's client) in three rounds if inj is not nil; errors a retry can
// fix are counted, others reported.
func raceResizes(t *testing.T, f *Family, inj *faults.Injector, names []string, done *atomic.Bool, resizes, errs *atomic.Int64) {
	ctx := context.Background()
	for k := 0; !done.Load(); k++ {
		if inj != nil && k%3 == 0 {
			inj.DropReply(faults.Match{Command: "EVALSHA"}, 1)
		}
		n := names[rand.IntN(len(names))]
		var err error
		switch k % 3 {
		case 0:
			_, err = f.Resize(ctx, n, 6)
		case 1:
			_, err = f.Resize(ctx, n, 1)
		default:
			err = f.Tick(ctx)
		}
		resizes.Add(1)
		if err != nil {
			errs.Add(1)
		}
		if errors.Is(err, ErrVanished) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooOld) {
			t.Errorf("resize of %s: %v", n, err)
			return
		}
	}
}

// staleRetries retries every event of every name, and adds one new event per name, through
// stale with each name's layout set back to old before every attempt.
func staleRetries(t *testing.T, stale *Family, log *eventLog, old map[string]*layout, events map[string][]Event) {
	for n, evs := range events {
		m, err := stale.member(n)
		require.NoError(t, err)
		for _, ev := range append(evs, Event{ID: "stale-new", Time: time.Now()}) {
			m.c.layout.Store(old[n])
			if !addUntilDone(t, stale, log, n, ev, len(ev.ID)%2 == 0) {
				return
			}
		}
	}
}

// Sealers whose clock runs two windows ahead seal and prune the old generations of names
// as soon as two families (two processes) promote and demote them, racing those Resizes,
// the families' own seal rounds and writers on both families that retry every event
// through the other one. A third family then retries every event, and adds new ones,
// through layouts read before the first promotion, whose generations are sealed and
// pruned by then. No event is counted twice: each is reported Applied at most once, in one
// generation, and every Sum equals the number of distinct events acknowledged (an attempt
// refused as too old changes nothing).
func TestReviewFamilySealRacesResize(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "standalone", true: "cluster"}[cluster], func(t *testing.T) {
			reviewSealRace(t, cluster)
		})
	}
}

func reviewSealRace(t *testing.T, cluster bool) {
	const window = time.Second
	names := []string{"hot:0", "hot:1", "hot:2"}
	o := FamilyOptions{Counter: Options{DedupWindow: window, SealInterval: time.Nanosecond}, Interval: -1, MaxStaleness: -1,
		HotStripes: 6, Detector: flipDetector{}, CoolAfter: time.Nanosecond}
	fams, _ := familyPair(t, cluster, 3, o)
	o.Counter.Prefix = fams[0].copts.Prefix
	var rc redis.UniversalClient = celebritytest.Standalone(t).Client(t)
	if cluster {
		rc = celebritytest.SharedCluster(t).Client(t)
	}
	stale := newFamily(t, rc, o)
	log := newEventLog()
	log.tooOldOK = true
	old, events := map[string]*layout{}, map[string][]Event{}
	sealers := map[string]*Counter{}
	for _, n := range names {
		ev := Event{ID: "stale-pre", Time: time.Now()}
		require.True(t, addUntilDone(t, stale, log, n, ev, false))
		events[n] = append(events[n], ev)
		m, err := stale.member(n)
		require.NoError(t, err)
		old[n] = m.c.layout.Load()
		sealers[n] = newCounter(t, rc, Options{Prefix: o.Counter.Prefix, Name: n, Stripes: 1, DedupWindow: window,
			Clock: func() time.Time { return time.Now().Add(2 * window) }})
	}
	var done atomic.Bool
	var resizes, resizeErrs atomic.Int64
	var rg sync.WaitGroup
	for i := range fams {
		// No lost replies here: an attempt whose reply is lost and whose retry is refused as
		// too old may have counted, so the acknowledged events would not be exact.
		rg.Go(func() { raceResizes(t, fams[i], nil, names, &done, &resizes, &resizeErrs) })
	}
	var folded atomic.Int64
	rg.Go(func() { raceSeals(t, sealers, &done, &folded) })
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		own, other := fams[w%2], fams[1-w%2]
		wg.Go(func() {
			for k := range 80 {
				n, ev := names[(w+k)%len(names)], Event{ID: fmt.Sprintf("w%d-%d", w, k), Time: time.Now()}
				if !addUntilDone(t, own, log, n, ev, k%2 == 0) || !addUntilDone(t, other, log, n, ev, k%3 == 0) {
					return
				}
				mu.Lock()
				events[n] = append(events[n], ev)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	time.Sleep(3 * window) // the sealers prune what they sealed
	done.Store(true)
	rg.Wait()
	staleRetries(t, stale, log, old, events)
	var pruned uint64
	for _, n := range names {
		for _, f := range []*Family{fams[0], fams[1], stale} {
			require.Equal(t, log.acked[n], mustFamilySum(t, f, n), "Sum of %s", n)
		}
		pruned = max(pruned, mustLayout(t, sealers[n]).doc.Gens[0].Gen-1)
	}
	t.Logf("%d resizes (%d failed), %d generations folded by the sealers, %d pruned in one name, %d events acknowledged, %d attempts too old",
		resizes.Load(), resizeErrs.Load(), folded.Load(), pruned, len(log.gen), log.tooOld.Load())
	require.Positive(t, folded.Load(), "the sealers sealed generations under the writers")
	require.Positive(t, pruned, "old generations were pruned")
}

// raceSeals seals every name with its sealer until done, counting the generations folded.
func raceSeals(t *testing.T, sealers map[string]*Counter, done *atomic.Bool, folded *atomic.Int64) {
	for !done.Load() {
		for n, c := range sealers {
			gens, err := c.Seal(context.Background())
			folded.Add(int64(len(gens)))
			if errors.Is(err, ErrVanished) || errors.Is(err, ErrInvalid) {
				t.Errorf("seal of %s: %v", n, err)
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}
