package fleet

import (
	"testing"

	"github.com/celebrity-go/celebrity/celebritytest"
)

func TestMain(m *testing.M) {
	// CELEBRITYTEST_ACL=celebrity (scripts/acl.sh runs this package in the root package's
	// lane) runs the tests as a user holding only the loop's part of a Cache's rule, for a
	// prefix pattern covering the prefixes the tests build with celebritytest.NewPrefix.
	celebritytest.RegisterRule("celebrity", func(p string) []string { return ACLRule(p+"*", true) })
	celebritytest.Main(m)
}
