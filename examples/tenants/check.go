package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/celebrity-go/celebrity/examples/internal/invariant"
)

// checker is the examples' invariant.Checker plus the steps of this example that were not
// run, so that the summary does not claim them. Its zero value is ready to use; skip and
// exit are called from main's goroutine only.
type checker struct {
	invariant.Checker
	skipped []string
}

// skip records a step that was not run, so that the summary does not claim it.
func (c *checker) skip(step string) {
	if !slices.Contains(c.skipped, step) {
		c.skipped = append(c.skipped, step)
	}
}

// exit prints the summary and exits 1 when an invariant broke, 0 otherwise.
func (c *checker) exit(name string) {
	fmt.Println()
	if len(c.skipped) > 0 {
		fmt.Printf("%s: not run, so not shown:\n  - %s\n", name, strings.Join(c.skipped, "\n  - "))
	}
	c.ExitIfBroken(name)
	if len(c.skipped) == 0 {
		fmt.Printf("%s: all %d invariants checked held\n", name, c.Checked())
		return
	}
	steps := "steps"
	if len(c.skipped) == 1 {
		steps = "step"
	}
	fmt.Printf("%s: all %d invariants checked held; %d %s not run (above)\n", name, c.Checked(), len(c.skipped), steps)
}
