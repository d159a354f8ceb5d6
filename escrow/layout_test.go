package escrow

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// TestKeyLayoutIsTheDocumentedOne drives a Pool and a Central through every kind of write
// (grants with leases, releases, a transfer, a renewal, a sweep), lists every key under their
// prefixes on the server, and checks each against the key layout in doc.go: the number of
// keys per owner it states, the name of each, and the witness and marker keys. Before the
// fix doc.go said seven keys per owner and did not name leases.
func TestKeyLayoutIsTheDocumentedOne(t *testing.T) {
	ctx := testkit.Ctx(t)
	c := celebritytest.Standalone(t).Client(t)
	prefix := celebritytest.NewPrefix(t)
	p := newTestPool(t, c, PoolOptions{Name: "N", Prefix: prefix, Capacity: 4, Owners: owners(4, "O", "B"), Lease: time.Minute})
	occ := newOccupancy(t, poolLimiter{p}, 4)
	defer occ.check(ctx, "written")
	g, err := p.Acquire(ctx, "O", "j1")
	require.NoError(t, err)
	occ.hold("j1", g, time.Now)
	exp, err := p.Renew(ctx, "O", "j1")
	require.NoError(t, err)
	occ.renewed("j1", exp)
	_, err = p.Acquire(ctx, "O", "j2")
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx, "O", "j2"))
	require.NoError(t, p.Transfer(ctx, "O", "B", 1, "T"))
	_, err = p.Sweep(ctx)
	require.NoError(t, err)
	cl, err := NewCentral(c, CentralOptions{Name: "L", Capacity: 2, Prefix: prefix, Lease: time.Minute, AllowWeakDurability: true})
	require.NoError(t, err)
	require.NoError(t, cl.Init(ctx))
	_, err = cl.Acquire(ctx, "j1")
	require.NoError(t, err)
	_, err = cl.Acquire(ctx, "j2")
	require.NoError(t, err)
	require.NoError(t, cl.Release(ctx, "j2"))

	keys, err := celebritytest.AdminOf(t, redis.UniversalClient(c)).Keys(ctx, prefix+"*").Result() // KEYS is not in the package's rule
	require.NoError(t, err)
	sort.Strings(keys)
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	layout := string(doc)
	layout = layout[strings.Index(layout, "// # Key layout"):]
	layout = layout[:strings.Index(layout, "// # ACL")]
	layout = strings.Join(strings.Fields(strings.ReplaceAll(layout, "//", "")), " ")
	perOwner := regexp.MustCompile(`A Pool named N gives each owner O (\w+) keys with the tag \{N:O\}: (.*?)\. The witness chain`).FindStringSubmatch(layout)
	require.NotNil(t, perOwner, "doc.go names the keys of each owner: %s", layout)
	words := map[string]int{"seven": 7, "eight": 8, "nine": 9, "ten": 10}

	pool := map[string][]string{}
	var central, other []string
	for _, k := range keys {
		rest := strings.TrimPrefix(k, prefix)
		switch {
		case strings.HasPrefix(rest, "{N:O}:"), strings.HasPrefix(rest, "{N:B}:"):
			pool[rest[:5]] = append(pool[rest[:5]], rest[6:])
		case strings.HasPrefix(rest, "{L}:"):
			central = append(central, rest[4:])
		default:
			other = append(other, rest)
		}
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:^|, |and )(\w+) \(`).FindAllStringSubmatch(perOwner[2], -1) {
		documented[m[1]] = true
	}
	var addressed []string
	for _, k := range p.ledgers["O"].keys {
		addressed = append(addressed, k[strings.LastIndexByte(k, ':')+1:])
	}
	require.Equalf(t, words[perOwner[1]], len(addressed), "the code addresses %v; doc.go says %s keys", addressed, perOwner[1])
	require.Lenf(t, documented, len(addressed), "doc.go describes %v", documented)
	for _, n := range addressed {
		require.Truef(t, documented[n], "doc.go describes the key %s of every owner (it describes %v)", n, documented)
	}
	require.Len(t, pool, 2)
	for tag, names := range pool {
		for _, n := range names {
			require.Truef(t, documented[n], "owner %s wrote %s, which doc.go does not describe", tag, n)
		}
	}
	require.Subset(t, pool["{N:O}"], []string{"leases", "released"}, "the test drove every kind of write")
	for _, k := range cl.l.keys {
		require.Containsf(t, layout, "P{L}:"+k[strings.LastIndexByte(k, ':')+1:], "doc.go names the Central's key %s", k)
	}
	for _, n := range central {
		require.Containsf(t, layout, "P{L}:"+n, "doc.go names the Central's key %s", n)
	}
	for _, k := range other {
		switch {
		case regexp.MustCompile(`^\{[^}]+\}:witness:N:[OB]$`).MatchString(k):
			require.Contains(t, layout, "P{X}:witness:N:O")
		case regexp.MustCompile(`^\{[^}]+\}:witness:L:created$`).MatchString(k):
			require.Contains(t, layout, "P{X}:witness:L:created")
		default:
			t.Errorf("key %s is not in doc.go's layout", k)
		}
	}
}
