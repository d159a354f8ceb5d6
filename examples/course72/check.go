package main

import (
	"fmt"
	"strings"

	"github.com/celebrity-go/celebrity/examples/internal/invariant"
)

// checker is the examples' invariant.Checker plus the parts of this example that were not
// run, so that the summary says exactly what was shown. Its zero value is ready to use; skip
// and exit are called from main's goroutine only.
type checker struct {
	invariant.Checker
	notRun []string
}

// skip records a part that was not run, and so not checked, and says why.
func (c *checker) skip(part, why string) {
	fmt.Printf("  NOT RUN  %s: %s\n", part, why)
	c.notRun = append(c.notRun, part)
}

// exit prints the summary and exits 1 when an invariant broke, 0 otherwise: a part that was
// not run is reported, not counted as a failure.
func (c *checker) exit(name string) {
	fmt.Println()
	c.ExitIfBroken(name)
	if len(c.notRun) == 0 {
		fmt.Printf("%s: all %d invariants checked held\n", name, c.Checked())
		return
	}
	fmt.Printf("%s: NOT checked, because not run here:\n  - %s\n", name, strings.Join(c.notRun, "\n  - "))
	fmt.Printf("%s: all %d invariants checked held; %d part(s) NOT run, listed above\n", name, c.Checked(), len(c.notRun))
}
