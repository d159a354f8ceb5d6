package celebritytest

import (
	"fmt"
	"os"
	"testing"
)

// ForMain returns a testing.TB for a TestMain, so that it can take servers from the kit
// before any test runs (for its runnable examples, say):
//
//	func TestMain(m *testing.M) {
//		exampleAddr = celebritytest.Standalone(celebritytest.ForMain()).Addr()
//		celebritytest.Main(m)
//	}
//
// Its Fatal and Fatalf print their message and exit with status 1, Skip and Skipf exit with
// status 0, Log and Logf print to standard error. Cleanup runs nothing: Main stops every
// server the kit started. Other methods of testing.TB must not be called on it.
func ForMain() testing.TB { return mainTB{} }

type mainTB struct{ testing.TB }

func (mainTB) Helper()        {}
func (mainTB) Cleanup(func()) {}
func (mainTB) Name() string   { return "TestMain" }
func (mainTB) Failed() bool   { return false }
func (mainTB) Log(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
}
func (mainTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
func (m mainTB) Fatal(args ...any) {
	m.Log(args...)
	os.Exit(1)
}
func (m mainTB) Fatalf(format string, args ...any) {
	m.Logf(format, args...)
	os.Exit(1)
}
func (m mainTB) Skip(args ...any) {
	m.Log(args...)
	os.Exit(0)
}
func (m mainTB) Skipf(format string, args ...any) {
	m.Logf(format, args...)
	os.Exit(0)
}
