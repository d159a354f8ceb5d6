package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Bound is the limit of a context from [Ctx]. It only turns a hang into a failure: the
// longest tests (a migration under writers beside driver processes, on a loaded 2-core
// machine running the race detector) take more than a minute, so the bound is minutes, and
// the run's -timeout stays above it so that the goroutines [Ctx] prints are the ones shown.
const Bound = 5 * time.Minute

// dumped is set once a context from Ctx ran into its bound and the goroutines were shown:
// the contexts of one test end at about the same moment, and one dump a binary is enough.
var dumped atomic.Bool

// Ctx returns a context for t's calls: t.Context() bounded by [Bound]. It is cancelled just
// before t's Cleanup functions run, so a cleanup must not use it. When it runs into its
// bound, the stacks of every goroutine are written to standard error (once a test binary),
// to show where the test hung.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Bound)
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && !dumped.Swap(true) {
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "%s: context deadline reached; goroutines:\n%s\n", t.Name(), buf)
		}
	})
	t.Cleanup(func() { stop(); cancel() })
	return ctx
}
