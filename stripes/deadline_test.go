package stripes

import (
	"context"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/stretchr/testify/require"
)

// With a stock client (go-redis waits its ReadTimeout and retries, about 5s, whatever the
// context says) and the server stopped, every I/O method returns by its ctx's deadline plus
// 50ms, and a ctx cancelled without a deadline ends the call as promptly.
func TestCallsReturnByTheirDeadlineWithAPausedMaster(t *testing.T) {
	celebritytest.Long(t)
	srv := celebritytest.NewServer(t, celebritytest.ServerOptions{})
	c := srv.Client(t)
	prefix := celebritytest.NewPrefix(t)
	ctr := newCounter(t, c, Options{Name: "views", Prefix: prefix, Stripes: 2, SealInterval: -1})
	fam := newFamily(t, c, FamilyOptions{Counter: Options{Prefix: prefix}})
	rd, err := NewReader(ctr, ReaderOptions{MaxStaleness: time.Nanosecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rd.Close() })
	ev := func(id string) Event { return Event{ID: id, Time: time.Now()} }
	_, err = ctr.Add(t.Context(), ev("warm"), 1)
	require.NoError(t, err)
	_, err = fam.Add(t.Context(), "post:1", ev("warm"), 1)
	require.NoError(t, err)

	calls := map[string]func(ctx context.Context) error{
		"Counter.Stamp": func(ctx context.Context) error { _, err := ctr.Stamp(ctx, "a"); return err },
		"Counter.Add":   func(ctx context.Context) error { _, err := ctr.Add(ctx, ev("b"), 1); return err },
		"Counter.AddBatch": func(ctx context.Context) error {
			_, errs := ctr.AddBatch(ctx, []Addition{{ev("c"), 1}, {ev("d"), 1}})
			return errs[0]
		},
		"Counter.Sum":    func(ctx context.Context) error { _, err := ctr.Sum(ctx); return err },
		"Counter.Layout": func(ctx context.Context) error { _, err := ctr.Layout(ctx); return err },
		"Counter.Resize": func(ctx context.Context) error { _, err := ctr.Resize(ctx, 3); return err },
		"Counter.Seal":   func(ctx context.Context) error { _, err := ctr.Seal(ctx); return err },
		"Reader.Value":   func(ctx context.Context) error { _, err := rd.Value(ctx); return err },
		"Family.Add":     func(ctx context.Context) error { _, err := fam.Add(ctx, "post:1", ev("e"), 1); return err },
		"Family.Add new": func(ctx context.Context) error { _, err := fam.Add(ctx, "post:2", ev("f"), 1); return err },
		"Family.AddBatch": func(ctx context.Context) error {
			_, errs := fam.AddBatch(ctx, []FamilyAddition{{"post:1", ev("g"), 1}, {"post:3", ev("h"), 1}})
			return errs[0]
		},
		"Family.Sum": func(ctx context.Context) error { _, err := fam.Sum(ctx, "post:4"); return err },
		"Family.SumMany": func(ctx context.Context) error {
			_, errs := fam.SumMany(ctx, []string{"post:1", "post:5"})
			return errs[1]
		},
		"Family.Resize": func(ctx context.Context) error { _, err := fam.Resize(ctx, "post:1", 2); return err },
		"Family.Tick":   func(ctx context.Context) error { return fam.Tick(ctx) },
	}
	srv.Pause()
	defer srv.Resume()
	celebritytest.RequireReturnsByDeadline(t, 300*time.Millisecond, calls)
}
