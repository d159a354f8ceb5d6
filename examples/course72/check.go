package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// checker prints each invariant's verdict and remembers which were checked, which broke and
// which parts of the example were not run, so that the summary says exactly what was shown.
// Its zero value is ready to use.
type checker struct {
	mu      sync.Mutex
	checked int
	broken  []string
	notRun  []string
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

// skip records a part that was not run, and so not checked, and says why.
func (c *checker) skip(part, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Printf("  NOT RUN  %s: %s\n", part, why)
	c.notRun = append(c.notRun, part)
}

// exit prints the summary and exits 1 when an invariant broke, 0 otherwise: a part that was
// not run is reported, not counted as a failure.
func (c *checker) exit(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Println()
	if len(c.broken) > 0 {
		fmt.Printf("%s: %d of %d invariants checked broke:\n  - %s\n", name, len(c.broken), c.checked,
			strings.Join(c.broken, "\n  - "))
		os.Exit(1)
	}
	if len(c.notRun) == 0 {
		fmt.Printf("%s: all %d invariants checked held\n", name, c.checked)
		return
	}
	fmt.Printf("%s: NOT checked, because not run here:\n  - %s\n", name, strings.Join(c.notRun, "\n  - "))
	fmt.Printf("%s: all %d invariants checked held; %d part(s) NOT run, listed above\n", name, c.checked, len(c.notRun))
}
