package stripes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keysUnder lists the keys under prefix on every node behind rc.
func keysUnder(t testing.TB, rc redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	rc = celebritytest.AdminOf(t, rc) // KEYS is not in the package's rule
	if cc, ok := rc.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var all []string
		require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			keys, err := m.Keys(ctx, prefix+"*").Result()
			mu.Lock()
			all = append(all, keys...)
			mu.Unlock()
			return err
		}))
		return all
	}
	keys, err := rc.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	return keys
}

// layoutFields returns the fields of c's layout hash, read directly.
func layoutFields(t testing.TB, rc redis.UniversalClient, c *Counter) map[string]string {
	t.Helper()
	key := c.keys.layout()
	m, err := nodeFor(t, rc, key).HGetAll(context.Background(), key).Result()
	require.NoError(t, err)
	return m
}

// previous returns a Counter of the version before home records on c's counter.
func previous(t testing.TB, rc redis.UniversalClient, c *Counter) *Counter {
	t.Helper()
	o := c.opts
	o.previousFormat, o.SealInterval = true, -1
	return newCounter(t, rc, o)
}

func TestColdCounterIsOneHashUntilResized(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		c := newCounter(t, rc, Options{Stripes: 1})
		now := time.Now()
		evs := []Event{{ID: "a", Time: now}, {ID: "b", Time: now}, {ID: "c", Time: now}}
		for _, ev := range evs {
			res, err := c.Add(ctx, ev, 1)
			require.NoError(t, err)
			require.True(t, res.Applied, ev.ID)
			res, err = c.Add(ctx, ev, 1)
			require.NoError(t, err)
			require.False(t, res.Applied, "retry of %s", ev.ID)
		}
		layoutKey := c.keys.layout()
		for _, k := range keysUnder(t, rc, c.opts.Prefix) {
			ok := k == layoutKey || strings.HasPrefix(k, layoutKey+":e:") || strings.HasSuffix(k, ":births")
			require.True(t, ok, "only the layout hash, its dedup sets and the birth record exist, not %s", k)
		}
		m := layoutFields(t, rc, c)
		require.Equal(t, homeVer, m["ver"])
		require.NotContains(t, m, "doc", "a home record has no document")
		require.Equal(t, "3", m["v"])

		lo, err := c.Layout(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(1), lo.Version)
		require.Len(t, lo.Generations, 1)
		g1 := lo.Generations[0]
		require.Equal(t, GenOpen, g1.State)
		require.Equal(t, []StripeValue{{Index: 0, Key: layoutKey, Value: 3}}, g1.Values)
		require.Equal(t, DefaultDedupSlices, lo.DedupSlices)
		require.Equal(t, time.Minute, lo.DedupWindow)

		// The first Resize writes the document beside the home stripe, which stays
		// generation 1 with its events and its dedup records.
		g, err := c.Resize(ctx, 4)
		require.NoError(t, err)
		require.Equal(t, uint64(2), g)
		m = layoutFields(t, rc, c)
		require.Contains(t, m, "doc")
		require.Equal(t, "3", m["ver"], "home record (1), pending generation 2 (2), open (3)")
		require.NotContains(t, m, "born", "the document holds the birth token from now on")
		require.True(t, mustLayout(t, c).doc.Gens[0].Home)
		fresh := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 1})
		for _, ev := range evs {
			res, err := fresh.Add(ctx, ev, 1)
			require.NoError(t, err)
			require.False(t, res.Applied, "retry of %s after the resize", ev.ID)
			require.Equal(t, uint64(1), res.Gen)
		}
		pastBoundary(t, c, 1)
		for i := range 20 {
			res, err := fresh.Add(ctx, Event{ID: fmt.Sprintf("g2-%d", i), Time: time.Now()}, 1)
			require.NoError(t, err)
			require.True(t, res.Applied)
			require.Equal(t, uint64(2), res.Gen)
		}
		require.Equal(t, int64(23), mustSum(t, c))
		require.Equal(t, int64(23), mustSum(t, fresh))
	})
}

// TestHomeGenerationIsSealedFoldedAndDropped follows a home generation to its end: sealed
// and folded one window after the resize, then dropped from the layout with its stripe's
// fields, after which the version before home records can read the counter again.
func TestHomeGenerationIsSealedFoldedAndDropped(t *testing.T) {
	celebritytest.Long(t)
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		const window = time.Second
		c := newCounter(t, rc, Options{Stripes: 1, DedupWindow: window})
		withLayout(t, c)
		var old []Event
		for i := range 30 {
			ev := Event{ID: fmt.Sprintf("g1-%d", i), Time: time.Now()}
			_, err := c.Add(ctx, ev, 1)
			require.NoError(t, err)
			old = append(old, ev)
		}
		_, err := c.Resize(ctx, 2)
		require.NoError(t, err)
		pastBoundary(t, c, 1)
		res, err := c.Add(ctx, Event{ID: "g2-0", Time: time.Now()}, 1)
		require.NoError(t, err)
		require.Equal(t, uint64(2), res.Gen)

		sealEventually(t, c, 1)
		require.Equal(t, int64(30), mustLayout(t, c).base)
		_, err = c.Add(ctx, old[0], 1)
		require.ErrorIs(t, err, ErrTooOld, "retry after the seal")
		require.Equal(t, int64(31), mustSum(t, c))

		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			_, err := c.Seal(context.Background())
			require.NoError(ct, err)
			require.Equal(ct, uint64(2), mustLayout(t, c).doc.Gens[0].Gen)
		}, 30*time.Second, 50*time.Millisecond, "generation 1 is dropped once its stripe can no longer be needed")
		m := layoutFields(t, rc, c)
		for f := range m {
			require.NotRegexp(t, `^(g|n|i|v|maxt|end|sealed|d\d+)$`, f, "the home stripe's fields are dropped with generation 1")
		}
		require.Equal(t, int64(31), mustSum(t, c))
		_, err = c.Add(ctx, old[1], 1)
		require.ErrorIs(t, err, ErrTooOld, "retry after generation 1 was dropped")

		// The document names no home generation any more: a process of the version before
		// reads it and agrees on where every record lives.
		ev2 := Event{ID: "g2-1", Time: time.Now()}
		res, err = c.Add(ctx, ev2, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		p := previous(t, rc, c)
		res, err = p.Add(ctx, ev2, 1)
		require.NoError(t, err)
		require.False(t, res.Applied, "retry through the version before")
		res, err = p.Add(ctx, Event{ID: "g2-2", Time: time.Now()}, 1)
		require.NoError(t, err)
		require.True(t, res.Applied)
		require.Equal(t, int64(33), mustSum(t, p))
		require.Equal(t, int64(33), mustSum(t, c))
	})
}

// TestUpgradePreviousVersionRefusesAHomeRecord: a counter created as a home record by this
// version is refused by a process of the version before (ErrLayout, nothing written), for
// every operation, before and after its first Resize; the retries it refused are counted
// once through this version.
func TestUpgradePreviousVersionRefusesAHomeRecord(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		c := newCounter(t, rc, Options{Stripes: 1})
		p := previous(t, rc, c)
		now := time.Now()
		for round, resize := range []int{0, 4} {
			if resize > 0 {
				_, err := c.Resize(ctx, resize)
				require.NoError(t, err)
			}
			for i := range 10 {
				ev := Event{ID: fmt.Sprintf("r%d-%d", round, i), Time: now}
				res, err := c.Add(ctx, ev, 1)
				require.NoError(t, err)
				require.True(t, res.Applied)
				_, err = p.Add(ctx, ev, 1)
				require.ErrorIs(t, err, ErrLayout, "the version before refuses the retry")
				_, err = p.Add(ctx, Event{ID: ev.ID + "-new", Time: now}, 1)
				require.ErrorIs(t, err, ErrLayout, "the version before refuses a new event")
			}
			_, err := p.Sum(ctx)
			require.ErrorIs(t, err, ErrLayout)
			_, err = p.Resize(ctx, 2)
			require.ErrorIs(t, err, ErrLayout)
			_, err = p.Seal(ctx)
			require.ErrorIs(t, err, ErrLayout)
			require.Equal(t, int64(10*(round+1)), mustSum(t, c))
		}
		require.Equal(t, uint64(2), mustLayout(t, c).current().Gen, "the refused Resize changed nothing")
	})
}

// TestUpgradeThisVersionUsesAPreviousLayout: a counter of one stripe created by the version
// before (a document and a stripe key) stays in that format: this version finds the same
// records, so retries across the two versions, both ways, count once, and either version
// may resize it.
func TestUpgradeThisVersionUsesAPreviousLayout(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		p := newCounter(t, rc, Options{Stripes: 1, previousFormat: true})
		c := newCounter(t, rc, Options{Prefix: p.opts.Prefix, Stripes: 1})
		now := time.Now()
		add := func(w *Counter, id string, applied bool) {
			t.Helper()
			res, err := w.Add(ctx, Event{ID: id, Time: now}, 1)
			require.NoError(t, err)
			require.Equal(t, applied, res.Applied, "event %s", id)
		}
		for i := range 10 {
			add(p, fmt.Sprintf("p%d", i), true)
			add(c, fmt.Sprintf("p%d", i), false)
			add(c, fmt.Sprintf("c%d", i), true)
			add(p, fmt.Sprintf("c%d", i), false)
		}
		require.NotEqual(t, homeVer, layoutFields(t, rc, c)["ver"])
		require.False(t, mustLayout(t, c).doc.Gens[0].Home)
		_, err := p.Resize(ctx, 3)
		require.NoError(t, err)
		add(c, "p0", false)
		add(c, "after-p", true)
		_, err = c.Resize(ctx, 1)
		require.NoError(t, err)
		add(p, "c0", false)
		add(p, "after-p", false)
		require.Equal(t, int64(21), mustSum(t, p))
		require.Equal(t, int64(21), mustSum(t, c))
	})
}

// TestUpgradeRaceCountsEveryEventOnce: for each of many new names, a process of each
// version starts at once and both send the same events, each reply lost now and then and the
// event then retried through the other version. Whichever format wins a name's layout key,
// every process agrees on it or refuses the name: every event counts once, and every
// event reported applied was reported so once.
func TestUpgradeRaceCountsEveryEventOnce(t *testing.T) {
	bothWithFaults(t, 0, func(t *testing.T, rc redis.UniversalClient, inj *faults.Injector) {
		loadScripts(t, rc)
		ctx := t.Context()
		prefix := celebritytest.NewPrefix(t)
		const names, events = 24, 12
		var homes, refused atomic.Int64
		var wg sync.WaitGroup
		for n := range names {
			name := fmt.Sprintf("post:%d:views", n)
			writers := [2]*Counter{
				newCounter(t, rc, Options{Name: name, Prefix: prefix, Stripes: 1, previousFormat: true}),
				newCounter(t, rc, Options{Name: name, Prefix: prefix, Stripes: 1}),
			}
			evs := make([]Event, events)
			for i := range evs {
				evs[i] = Event{ID: fmt.Sprintf("%s-%d", name, i), Time: time.Now()}
			}
			var applied [events]atomic.Int64
			var start sync.WaitGroup
			start.Add(1)
			var done sync.WaitGroup
			for w := range writers {
				done.Go(func() {
					start.Wait()
					for i, ev := range evs {
						if i%5 == w {
							inj.DropReply(faults.Match{Command: "EVALSHA", Arg: newRoute(ev.ID, DefaultDedupBits).member}, 1)
						}
						for k := w; ; k++ { // a failed attempt is retried through the other version
							res, err := writers[k%2].Add(ctx, ev, 1)
							if errors.Is(err, ErrLayout) && k%2 == 0 {
								refused.Add(1)
								continue
							}
							if err == nil {
								if res.Applied {
									applied[i].Add(1)
								}
								break
							}
							if !errors.Is(err, faults.ErrReplyDropped) {
								t.Errorf("%s: %v", ev.ID, err)
								return
							}
						}
					}
				})
			}
			wg.Go(func() {
				start.Done()
				done.Wait()
				for i := range applied {
					assert.LessOrEqual(t, applied[i].Load(), int64(1), "%s reported applied twice", evs[i].ID)
				}
				assert.Equal(t, int64(events), mustSum(t, writers[1]), name)
				if layoutFields(t, rc, writers[1])["ver"] == homeVer {
					homes.Add(1)
				}
			})
		}
		wg.Wait()
		require.Positive(t, inj.Dropped(), "replies were lost")
		t.Logf("%d of %d names created as home records, %d attempts refused by the version before, %d replies lost",
			homes.Load(), names, refused.Load(), inj.Dropped())
	})
}

// TestHomeRecordKeepsItsDedupSettings: a home record created with the default dedup
// settings records none, yet a process with other settings is refused, as for a document.
func TestHomeRecordKeepsItsDedupSettings(t *testing.T) {
	rc := celebritytest.Standalone(t).Client(t)
	ctx := t.Context()
	prefix := celebritytest.NewPrefix(t)
	for _, window := range []time.Duration{DefaultDedupWindow, time.Minute} {
		name := fmt.Sprintf("views-%v", window)
		c := newCounter(t, rc, Options{Name: name, Prefix: prefix, Stripes: 1, DedupWindow: window})
		_, err := c.Add(ctx, Event{ID: "a", Time: time.Now()}, 1)
		require.NoError(t, err)
		_, recorded := layoutFields(t, rc, c)["dedup"]
		require.Equal(t, window != DefaultDedupWindow, recorded, "settings recorded only when not the defaults")
		other := newCounter(t, rc, Options{Name: name, Prefix: prefix, Stripes: 1, DedupWindow: 2 * time.Minute})
		_, err = other.Add(ctx, Event{ID: "a", Time: time.Now()}, 1)
		require.ErrorIs(t, err, ErrInvalid, "window %v", window)
		lo, err := ReadLayout(ctx, rc, prefix, name)
		require.NoError(t, err)
		require.Equal(t, window, lo.DedupWindow)
		require.Equal(t, int64(1), lo.Generations[0].Total)
	}
}

// TestLostHomeRecordIsReported: a home record that disappears is reported as ErrVanished,
// never counted again from zero, by a Counter that read it and by a fresh one (through the
// birth record).
func TestLostHomeRecordIsReported(t *testing.T) {
	celebritytest.Both(t, func(t *testing.T, rc redis.UniversalClient) {
		ctx := t.Context()
		c := newCounter(t, rc, Options{Stripes: 1})
		ev := Event{ID: "a", Time: time.Now()}
		_, err := c.Add(ctx, ev, 1)
		require.NoError(t, err)
		key := c.keys.layout()
		require.NoError(t, nodeFor(t, rc, key).Del(ctx, key).Err())
		_, err = c.Add(ctx, ev, 1)
		require.ErrorIs(t, err, ErrVanished, "retry through the Counter that read the record")
		_, err = c.Add(ctx, Event{ID: "b", Time: time.Now()}, 1)
		require.ErrorIs(t, err, ErrVanished, "new event through the Counter that read the record")
		_, err = c.Sum(ctx)
		require.ErrorIs(t, err, ErrVanished)
		fresh := newCounter(t, rc, Options{Prefix: c.opts.Prefix, Stripes: 1})
		_, err = fresh.Add(ctx, ev, 1)
		require.ErrorIs(t, err, ErrVanished, "retry through a fresh Counter")
		require.Empty(t, layoutFields(t, rc, c), "nothing was created again")
	})
}

// TestUpgradeFamiliesOfBothVersionsCountOnce runs a Family of each version, on clients of
// their own (two processes mid-upgrade), over the same names while both loops promote and
// demote them at random: half the names are first written by the previous version (a
// document), half by this one (home records). Both send every event, lost replies are
// retried, and an event the previous version refuses is retried through this one. Every
// name's Sum is its number of distinct events, no event is reported applied twice, the
// previous version is refused on the names this one created and reads the others. Each name is also
// resized once by the version that created it before the events, so that every name
// crosses a generation whatever the loops do.
func TestUpgradeFamiliesOfBothVersionsCountOnce(t *testing.T) {
	run := func(t *testing.T, clients [2]redis.UniversalClient, injs [2]*faults.Injector) {
		ctx := t.Context()
		prefix := celebritytest.NewPrefix(t)
		const names, perName = 16, 15
		var fams [2]*Family // 0: the previous version, 1: this one
		for i := range fams {
			loadScripts(t, clients[i])
			fams[i] = newFamily(t, clients[i], FamilyOptions{
				Counter:  Options{Prefix: prefix, DedupWindow: 30 * time.Second, SealInterval: 50 * time.Millisecond, previousFormat: i == 0},
				Interval: 20 * time.Millisecond, MaxStaleness: -1, HotStripes: 4, Detector: flipDetector{}, CoolAfter: time.Millisecond,
			})
		}
		name := func(i int) string { return fmt.Sprintf("post:%d:views", i) }
		first := func(i int) int { return i % 2 } // the version that creates name i
		for i := range names {
			_, err := fams[first(i)].Add(ctx, name(i), Event{ID: "first", Time: time.Now()}, 1)
			require.NoError(t, err)
			_, err = fams[first(i)].Resize(ctx, name(i), 2)
			require.NoError(t, err)
		}
		events := make([]Event, perName)
		for k := range events {
			events[k] = Event{ID: fmt.Sprintf("v%d", k), Time: time.Now()}
		}
		var refused [names]atomic.Int64
		var applied [names][perName]atomic.Int64
		var wg sync.WaitGroup
		for w := range fams {
			wg.Go(func() {
				for k, ev := range events {
					injs[w].DropReply(faults.Match{Command: "EVALSHA", Arg: addScript.Hash()}, 2)
					injs[w].DropReply(faults.Match{Command: "EVALSHA", Arg: addFastScript.Hash()}, 2)
					for i := range names {
						f := fams[w]
						res, err := f.Add(ctx, name(i), ev, 1)
						for err != nil {
							if errors.Is(err, ErrLayout) && f == fams[0] {
								refused[i].Add(1)
								f = fams[1]
							} else if !errors.Is(err, faults.ErrReplyDropped) && !errors.Is(err, ErrConflict) {
								t.Errorf("%s %s: %v", name(i), ev.ID, err)
								return
							}
							res, err = f.Add(ctx, name(i), ev, 1)
						}
						if res.Applied {
							applied[i][k].Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		for i := range names {
			require.Equal(t, int64(perName+1), mustFamilySum(t, fams[1], name(i)), name(i))
			if first(i) == 1 {
				require.Positive(t, refused[i].Load(), "%s is a home record: the previous version refuses it", name(i))
			} else {
				require.Equal(t, int64(perName+1), mustFamilySum(t, fams[0], name(i)), "%s has a document the previous version reads", name(i))
			}
		}
		for i := range names {
			for k := range events {
				require.LessOrEqual(t, applied[i][k].Load(), int64(1), "%s %s reported applied twice", name(i), events[k].ID)
			}
			m, err := fams[1].member(name(i))
			require.NoError(t, err)
			l, err := m.c.loadLayout(ctx)
			require.NoError(t, err)
			require.Greater(t, l.current().Gen, uint64(1), name(i))
		}
		require.Positive(t, injs[0].Dropped()+injs[1].Dropped(), "replies were lost")
	}
	onTwoLossyClients(t, false, run)
}
