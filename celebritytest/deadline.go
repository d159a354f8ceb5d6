package celebritytest

import (
	"context"
	"sort"
	"testing"
	"time"
)

// DeadlineMargin is how long past its ctx's deadline, or past a cancel, a call may take in
// [RequireReturnsByDeadline].
const DeadlineMargin = 50 * time.Millisecond

// RequireReturnsByDeadline runs each call twice, in name order: once with a ctx whose
// deadline is wait away, and once with a ctx without a deadline that is cancelled after
// wait. It fails t when either takes longer than wait + DeadlineMargin. Run it with a
// server paused ([Server.Pause]) to check that a component's I/O returns by its caller's
// deadline whatever the client's options (a stock go-redis client waits its ReadTimeout
// and retries, about 5s, whatever the context says). The calls' errors are not checked: a
// call served from memory may succeed.
func RequireReturnsByDeadline(t testing.TB, wait time.Duration, calls map[string]func(ctx context.Context) error) {
	t.Helper()
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		call := calls[name]
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		if took > wait+DeadlineMargin {
			t.Fatalf("%s with a deadline %v away returned after %v: %v", name, wait, took, err)
		}

		ctx, cancel = context.WithCancel(context.Background())
		timer := time.AfterFunc(wait, cancel)
		start = time.Now()
		err = call(ctx)
		took = time.Since(start)
		timer.Stop()
		cancel()
		if took > wait+DeadlineMargin {
			t.Fatalf("%s cancelled after %v returned after %v: %v", name, wait, took, err)
		}
	}
}
