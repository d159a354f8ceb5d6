// Package invariant prints the verdicts of an example's invariant checks and ends the
// example with a summary and an exit status: 1 when an invariant broke, so that
// scripts/examples.sh fails the run.
//
//	var c invariant.Checker
//	c.Check(sold == 100, "exactly 100 seats sold (%d)", sold)
//	c.Exit("course72")
package invariant

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Checker prints each invariant's verdict and remembers how many were checked and which
// broke, so that the summary says exactly what was shown. Its methods may be called from
// several goroutines. Its zero value is ready to use.
type Checker struct {
	mu      sync.Mutex
	checked int
	broken  []string
}

// Check records the invariant described by format and args as broken unless ok, and prints
// the verdict.
func (c *Checker) Check(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked++
	if ok {
		fmt.Printf("  ok       %s\n", msg)
		return
	}
	fmt.Printf("  FAIL     %s\n", msg)
	c.broken = append(c.broken, msg)
}

// Checked returns how many invariants were checked so far.
func (c *Checker) Checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

// ExitIfBroken lists the broken invariants under the example's name and exits 1 when one
// broke; otherwise it prints nothing and returns. An example that reports more than Exit
// does (the parts it did not run) calls it before its own summary.
func (c *Checker) ExitIfBroken(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.broken) > 0 {
		fmt.Printf("%s: %d of %d invariants checked broke:\n  - %s\n", name, len(c.broken), c.checked,
			strings.Join(c.broken, "\n  - "))
		os.Exit(1)
	}
}

// Exit prints the summary after a blank line and exits 1 when an invariant broke; otherwise
// it returns after saying that all of them held.
func (c *Checker) Exit(name string) {
	fmt.Println()
	c.ExitIfBroken(name)
	fmt.Printf("%s: all %d invariants checked held\n", name, c.Checked())
}
