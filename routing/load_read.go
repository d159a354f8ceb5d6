package routing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/slot"
)

// DefaultLoadWindow is how much of the published load summary ReadTenantLoad merges when
// its window is 0.
const DefaultLoadWindow = time.Minute

// maxLoadIntervals bounds the intervals one ReadTenantLoad merges.
const maxLoadIntervals = 10_000

// TenantLoad is the per-tenant load that the Routers under one prefix published
// (Options.Load), merged over a window of intervals and over every Router, as
// [ReadTenantLoad] reads it.
type TenantLoad struct {
	// Prefix is the Options.Prefix the summary was read under.
	Prefix string
	// From and To bound the span the merged intervals cover (zero when Empty).
	From, To time.Time
	// Intervals is the number of published intervals merged; Reports the number of Router
	// reports in them (one per Router and interval in which it counted something).
	Intervals int
	Reports   int
	// Ops is every Do and Get call the reporting Routers counted over the span.
	Ops uint64
	// Tenants are the tenants the Routers tracked, busiest first (then by name).
	Tenants []TenantOps
}

// TenantOps is one tenant's operations in a TenantLoad.
type TenantOps struct {
	Tenant string
	// Ops is the tenant's Do and Get calls over the span, as counted: it overstates the
	// true number by at most Err (0 unless a Router tracked more tenants than its
	// LoadOptions.Capacity in some interval).
	Ops uint64
	Err uint64
	// Rate is Ops per second of the span.
	Rate float64
}

// Empty reports whether no Router published a load summary under the prefix within the
// retention of its intervals.
func (l TenantLoad) Empty() bool { return l.Intervals == 0 }

// Span returns the time the merged intervals cover.
func (l TenantLoad) Span() time.Duration { return l.To.Sub(l.From) }

// ReadTenantLoad reads the per-tenant load summary that the Routers created with
// Options.Prefix prefix and Options.Load publish in the control Redis, through client (a
// *redis.Client or a *redis.ClusterClient: the summary's keys share one hash slot), without
// a Router and without writing anything. It merges the intervals published in the window
// that ends with the newest one (window 0 means DefaultLoadWindow); a tenant's Rate is its
// operations over the span they cover. prefix "" means DefaultPrefix. A prefix or window out
// of range gives an error wrapping ErrInvalid; a prefix no Router published under gives
// an Empty TenantLoad and no error.
//
// The summary is eventually consistent: a Router publishes an interval just after it ends,
// so the newest interval may still lack some Routers' reports.
func ReadTenantLoad(ctx context.Context, client redis.UniversalClient, prefix string, window time.Duration) (TenantLoad, error) {
	if err := checkReadLoad(client, prefix, window); err != nil {
		return TenantLoad{}, err
	}
	if window == 0 {
		window = DefaultLoadWindow
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	k := Keys{Prefix: prefix}
	out := TenantLoad{Prefix: prefix, Tenants: []TenantOps{}}
	members, err := loadMembers(ctx, client, k, window)
	if err != nil || len(members) == 0 {
		return out, err
	}
	hashes, err := loadHashes(ctx, client, k, members)
	if err != nil {
		return out, err
	}
	mergeLoad(&out, hashes)
	return out, nil
}

func checkReadLoad(client redis.UniversalClient, prefix string, window time.Duration) error {
	switch {
	case client == nil:
		return invalidf("ReadTenantLoad: client must not be nil")
	case len(prefix) > 128 || !utf8.ValidString(prefix) || slot.HasBraces(prefix):
		return invalidf("ReadTenantLoad: prefix must be 0..128 bytes of UTF-8 without '{' or '}', got %q", prefix)
	case window < 0 || window > 7*24*time.Hour:
		return invalidf("ReadTenantLoad: window must be 0..168h, got %v", window)
	}
	return nil
}

// loadMembers returns the index members of the intervals that end within window of the
// newest, oldest first.
func loadMembers(ctx context.Context, c redis.UniversalClient, k Keys, window time.Duration) ([]string, error) {
	newest, err := c.ZRevRangeWithScores(ctx, k.LoadIndex(), 0, 0).Result()
	if err != nil {
		return nil, fmt.Errorf("routing: read the load index: %w", err)
	}
	if len(newest) == 0 {
		return nil, nil
	}
	lo := strconv.FormatInt(int64(newest[0].Score)-window.Milliseconds(), 10)
	ms, err := bound.Do(ctx, func() ([]string, error) {
		return c.ZRangeByScore(ctx, k.LoadIndex(), &redis.ZRangeBy{Min: "(" + lo, Max: "+inf", Count: maxLoadIntervals}).Result()
	})
	if err != nil {
		return nil, fmt.Errorf("routing: read the load index: %w", err)
	}
	return ms, nil
}

// loadHashes reads the intervals' hashes in one pipeline; an interval that expired
// meanwhile reads as an empty map.
func loadHashes(ctx context.Context, c redis.UniversalClient, k Keys, members []string) ([]map[string]string, error) {
	cmds := make([]*redis.MapStringStringCmd, len(members))
	_, err := bound.Pipelined(ctx, c, func(p redis.Pipeliner) error {
		for i, m := range members {
			cmds[i] = p.HGetAll(ctx, k.LoadInterval(m))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("routing: read the load intervals: %w", err)
	}
	out := make([]map[string]string, len(cmds))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out, nil
}

// mergeLoad adds the intervals' hashes into l and computes the rates. It is pure.
func mergeLoad(l *TenantLoad, hashes []map[string]string) {
	var from, to int64
	tenants := map[string]*TenantOps{}
	for _, h := range hashes {
		f, ferr := strconv.ParseInt(h["from"], 10, 64)
		t, terr := strconv.ParseInt(h["to"], 10, 64)
		if ferr != nil || terr != nil || t <= f {
			continue // expired (empty) or not written by load.lua
		}
		if l.Intervals == 0 || f < from {
			from = f
		}
		to = max(to, t)
		l.Intervals++
		n, _ := strconv.ParseUint(h["ops"], 10, 64)
		l.Ops += n
		for field, v := range h {
			mergeField(l, tenants, h, field, v)
		}
	}
	if l.Intervals == 0 {
		return
	}
	l.From, l.To = time.UnixMilli(from).UTC(), time.UnixMilli(to).UTC()
	secs := l.Span().Seconds()
	for _, t := range tenants {
		t.Rate = float64(t.Ops) / secs
		l.Tenants = append(l.Tenants, *t)
	}
	slices.SortFunc(l.Tenants, func(a, b TenantOps) int {
		if c := cmp.Compare(b.Ops, a.Ops); c != 0 {
			return c
		}
		return strings.Compare(a.Tenant, b.Tenant)
	})
}

// mergeField adds one field of an interval's hash: a report ID or a tenant's count.
func mergeField(l *TenantLoad, tenants map[string]*TenantOps, h map[string]string, field, v string) {
	if strings.HasPrefix(field, "r:") {
		l.Reports++
		return
	}
	tenant, ok := strings.CutPrefix(field, "t:")
	if !ok {
		return
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return
	}
	e, _ := strconv.ParseUint(h["e:"+tenant], 10, 64)
	t := tenants[tenant]
	if t == nil {
		t = &TenantOps{Tenant: tenant}
		tenants[tenant] = t
	}
	t.Ops += n
	t.Err += e
}
