package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// checker prints each invariant's verdict and remembers which were checked and which broke,
// so that the summary says exactly what was shown.
// Its zero value is ready to use.
type checker struct {
	mu      sync.Mutex
	checked int
	broken  []string
	skipped []string
}

// skip records a step that was not run, so that the summary does not claim it.
func (c *checker) skip(step string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.skipped {
		if s == step {
			return
		}
	}
	c.skipped = append(c.skipped, step)
}

// check records msg as a broken invariant unless ok, and prints the verdict.
func (c *checker) check(ok bool, format string, args ...any) {
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

// exit prints the summary and exits 1 when an invariant broke, 0 otherwise.
func (c *checker) exit(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Println()
	if len(c.skipped) > 0 {
		fmt.Printf("%s: not run, so not shown:\n  - %s\n", name, strings.Join(c.skipped, "\n  - "))
	}
	if len(c.broken) > 0 {
		fmt.Printf("%s: %d of %d invariants checked broke:\n  - %s\n", name, len(c.broken), c.checked,
			strings.Join(c.broken, "\n  - "))
		os.Exit(1)
	}
	if len(c.skipped) > 0 {
		steps := "steps"
		if len(c.skipped) == 1 {
			steps = "step"
		}
		fmt.Printf("%s: all %d invariants checked held; %d %s not run (above)\n", name, c.checked, len(c.skipped), steps)
		return
	}
	fmt.Printf("%s: all %d invariants checked held\n", name, c.checked)
}
