package hotkeys_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

const celebrity = "post:celebrity"

// recorder collects the events a detector fires.
type recorder struct {
	mu     sync.Mutex
	events []hotkeys.KeyEvent
}

func (r *recorder) add(ev hotkeys.KeyEvent) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) kinds(key string) (hot, cool []hotkeys.KeyEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Key != key {
			continue
		}
		if ev.Kind == hotkeys.Hot {
			hot = append(hot, ev)
		} else {
			cool = append(cool, ev)
		}
	}
	return hot, cool
}

func (r *recorder) all() []hotkeys.KeyEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hotkeys.KeyEvent(nil), r.events...)
}

// traffic drives a detector on a fake clock: every step it observes 1000 requests spread
// over 1000 background keys plus as many requests for the celebrity as make it the given
// share of the step, then evaluates.
type traffic struct {
	d    *hotkeys.Detector
	clk  *testkit.Clock
	step time.Duration
	next int
	// onStep, when set, runs after each evaluation.
	onStep func()
}

func (tr *traffic) run(dur time.Duration, share float64) {
	const background = 1000
	celeb := int(math.Round(background * share / (1 - share)))
	for elapsed := time.Duration(0); elapsed < dur; elapsed += tr.step {
		total, acc := background+celeb, 0
		for range total {
			// Interleave the celebrity evenly with the background keys.
			if acc += celeb; acc >= total {
				acc -= total
				tr.d.Observe(celebrity)
				continue
			}
			tr.d.Observe("bg:" + strconv.Itoa(tr.next%1000))
			tr.next++
		}
		tr.clk.Advance(tr.step)
		tr.d.Evaluate()
		if tr.onStep != nil {
			tr.onStep()
		}
	}
}

// newTraffic returns a detector with a 10s window of 5 sub-windows, hot at 20% share,
// cooling below 10% after a 5s hold, sampling a quarter of the requests with a seeded
// source, evaluated by the test every 500ms of fake time.
func newTraffic(t *testing.T, rec *recorder) *traffic {
	t.Helper()
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate:   0.25,
		Capacity:     256,
		Window:       10 * time.Second,
		Buckets:      5,
		HotShare:     0.2,
		CoolShare:    0.1,
		Hold:         5 * time.Second,
		EvalInterval: -1,
		Clock:        clk.Now,
		Rand:         (&lockedRand{r: rand.New(rand.NewPCG(1, 2))}).Uint64,
		OnHot:        rec.add,
		OnCool:       rec.add,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return &traffic{d: d, clk: clk, step: 500 * time.Millisecond}
}

func TestCelebrityTurnsHotWithinOneWindowAndCoolsOnceAfterHold(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	tr := newTraffic(t, rec)

	tr.run(20*time.Second, 0)
	require.Empty(t, rec.all(), "background traffic spread over 1000 keys makes nothing hot")

	jump := tr.clk.Now()
	tr.run(10*time.Second, 0.5)
	hot, cool := rec.kinds(celebrity)
	require.Len(t, hot, 1, "the celebrity is reported hot within one window of its jump")
	require.Empty(t, cool)
	require.LessOrEqual(t, hot[0].At.Sub(jump), 10*time.Second)
	t.Logf("hot %v after the jump, at share %.3f", hot[0].At.Sub(jump), hot[0].Load.Share)
	require.GreaterOrEqual(t, hot[0].Load.Share, 0.2)
	require.Equal(t, []string{celebrity}, tr.d.Hot())

	tr.run(10*time.Second, 0.5)
	hot, _ = rec.kinds(celebrity)
	require.Len(t, hot, 1, "a key that stays hot is reported once")

	// The celebrity drops out. Record when its windowed share first falls below CoolShare:
	// the cool event must come one hold time later, not before, and only once.
	drop := tr.clk.Now()
	var below time.Time
	tr.onStep = func() {
		top, err := tr.d.Top(1000)
		require.NoError(t, err)
		s := 0.0
		for _, l := range top {
			if l.Key == celebrity {
				s = l.Share
			}
		}
		if below.IsZero() && s < 0.1 {
			below = tr.clk.Now()
		}
	}
	tr.run(40*time.Second, 0)
	hot, cool = rec.kinds(celebrity)
	require.Len(t, hot, 1)
	require.Len(t, cool, 1, "the celebrity cools exactly once")
	require.False(t, below.IsZero())
	require.GreaterOrEqual(t, cool[0].At.Sub(below), 5*time.Second, "not before the hold time")
	require.LessOrEqual(t, cool[0].At.Sub(below), 5*time.Second+tr.step, "promptly after the hold time")
	require.LessOrEqual(t, cool[0].At.Sub(drop), 10*time.Second+5*time.Second+tr.step)
	t.Logf("share below CoolShare %v after the drop; cool event %v after the drop", below.Sub(drop), cool[0].At.Sub(drop))
	require.Greater(t, cool[0].Seq, hot[0].Seq)
	require.Empty(t, tr.d.Hot())
	st := tr.d.Stats()
	require.Equal(t, uint64(1), st.HotEvents)
	require.Equal(t, uint64(1), st.CoolEvents)
	require.Zero(t, st.Hot)
}

func TestKeyHoveringAroundHotThresholdDoesNotFlap(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	tr := newTraffic(t, rec)
	tr.run(10*time.Second, 0)
	tr.run(10*time.Second, 0.3)
	require.Equal(t, []string{celebrity}, tr.d.Hot())

	// Alternate 6s at 30% and 6s at 5%: the windowed share swings across HotShare (20%)
	// but stays above CoolShare (10%). Count the crossings to prove the swing is real.
	crossings, last := 0, true
	tr.onStep = func() {
		top, err := tr.d.Top(1)
		require.NoError(t, err)
		require.Equal(t, celebrity, top[0].Key)
		above := top[0].Share >= 0.2
		if above != last {
			crossings++
			last = above
		}
		require.GreaterOrEqual(t, top[0].Share, 0.1, "the swing stays above CoolShare")
	}
	for range 5 {
		tr.run(6*time.Second, 0.3)
		tr.run(6*time.Second, 0.05)
	}
	require.GreaterOrEqual(t, crossings, 6, "the windowed share crossed HotShare repeatedly")
	hot, cool := rec.kinds(celebrity)
	require.Len(t, hot, 1, "one hot event despite the crossings")
	require.Empty(t, cool, "no cool event while above CoolShare")

	tr.onStep = nil
	tr.run(30*time.Second, 0)
	hot, cool = rec.kinds(celebrity)
	require.Len(t, hot, 1)
	require.Len(t, cool, 1)
}

func TestHotByRate(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	rec := &recorder{}
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Window: time.Second, HotRate: 500, Hold: time.Second,
		EvalInterval: -1, Clock: clk.Now, OnHot: rec.add, OnCool: rec.add,
	})
	require.NoError(t, err)
	defer d.Close()
	// 10 ms steps: the celebrity at 1000/s, 100 other keys at 100/s each.
	for step := range 200 {
		for range 10 {
			d.Observe(celebrity)
		}
		d.Observe("k" + strconv.Itoa(step%100))
		clk.Advance(10 * time.Millisecond)
		d.Evaluate()
	}
	top, err := d.Top(1)
	require.NoError(t, err)
	require.InDelta(t, 1000, top[0].Rate, 100, "estimated rate of the celebrity")
	require.Equal(t, []string{celebrity}, d.Hot())
	hot, _ := rec.kinds(celebrity)
	require.Len(t, hot, 1)
	require.Len(t, rec.all(), 1, "keys at a tenth of the threshold stay cold")
}

func TestFewSamplesNeverMakeAKeyHot(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	rec := &recorder{}
	d, err := hotkeys.New(hotkeys.Options{SampleRate: 1, EvalInterval: -1, Clock: clk.Now, OnHot: rec.add})
	require.NoError(t, err)
	defer d.Close()
	for range hotkeys.DefaultMinSamples - 1 {
		d.Observe(celebrity) // 100% share, but too few samples
	}
	clk.Advance(time.Second)
	d.Evaluate()
	require.Empty(t, rec.all())
	d.Observe(celebrity)
	d.Evaluate()
	require.Len(t, rec.all(), 1, "MinSamples reached")
}

// TestCallbacksRunOutsideLocks calls back into the detector from OnHot: under a lock this
// would deadlock.
func TestCallbacksRunOutsideLocks(t *testing.T) {
	clk := testkit.NewClock(clockStart)
	var d *hotkeys.Detector
	done := make(chan []string, 1)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, EvalInterval: -1, Clock: clk.Now,
		OnHot: func(ev hotkeys.KeyEvent) {
			d.Observe(ev.Key)
			_, _ = d.Top(5)
			_ = d.Snapshot()
			d.Evaluate()
			done <- d.Hot()
		},
	})
	require.NoError(t, err)
	defer d.Close()
	for range 100 {
		d.Observe(celebrity)
	}
	clk.Advance(time.Second)
	go d.Evaluate()
	select {
	case hot := <-done:
		require.Equal(t, []string{celebrity}, hot, "the hot set is updated before the callback runs")
	case <-time.After(30 * time.Second):
		t.Fatal("OnHot calling back into the detector did not return: a lock is held")
	}
}

// TestBackgroundLoopEvaluatesAndStopsOnClose runs the owned goroutine on the real clock;
// TestMain checks that Close left no goroutine behind.
func TestBackgroundLoopEvaluatesAndStopsOnClose(t *testing.T) {
	hot := make(chan hotkeys.KeyEvent, 1)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate: 1, Window: 200 * time.Millisecond, Buckets: 4, EvalInterval: 10 * time.Millisecond,
		OnHot: func(ev hotkeys.KeyEvent) {
			select {
			case hot <- ev:
			default:
			}
		},
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for range 50 {
			d.Observe(celebrity)
		}
		return len(hot) == 1
	}, 30*time.Second, 5*time.Millisecond)
	require.Equal(t, celebrity, (<-hot).Key)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "Close is idempotent")
	n := d.Stats().Evaluations
	d.Observe(celebrity) // still safe after Close
	require.Equal(t, n, d.Stats().Evaluations, "no evaluation after Close")
}

// TestHoldStartsAtTheFirstEvaluationBelowCool: the evaluation that makes a key hot sees it
// far above CoolShare, so it must not start the key's cooling hold. The key then gets no
// traffic; the next evaluation, a whole Hold later, is the first one below: the hold starts
// there and the key cools one Hold after it, not at once.
func TestHoldStartsAtTheFirstEvaluationBelowCool(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	clk := testkit.NewClock(clockStart)
	d, err := hotkeys.New(hotkeys.Options{
		SampleRate:   1,
		Window:       2 * time.Second,
		Buckets:      2,
		HotShare:     0.5,
		CoolShare:    0.1,
		Hold:         5 * time.Second,
		EvalInterval: -1,
		Clock:        clk.Now,
		OnHot:        rec.add,
		OnCool:       rec.add,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })

	for range 100 {
		d.Observe(celebrity)
	}
	d.Evaluate()
	require.Equal(t, []string{celebrity}, d.Hot())
	promoted := clk.Now()

	clk.Advance(5 * time.Second) // the window has forgotten the key
	d.Evaluate()
	_, cool := rec.kinds(celebrity)
	require.Empty(t, cool, "the first evaluation below CoolShare starts the hold; it does not end it")
	require.Equal(t, []string{celebrity}, d.Hot())

	clk.Advance(5 * time.Second)
	d.Evaluate()
	_, cool = rec.kinds(celebrity)
	require.Len(t, cool, 1, "the key cools one Hold after the first evaluation below CoolShare")
	require.Equal(t, promoted.Add(10*time.Second), cool[0].At)
	require.Empty(t, d.Hot())
}
