package celebrity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/fleet"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// FleetRates are the fleet-wide rates of Redis-level reads (Gets that missed the instances'
// L1) that a fleet of Caches reported for one report interval, as ReadFleetRates reads them.
type FleetRates struct {
	// Prefix is the Options.Prefix the rates were read under.
	Prefix string
	// Start is when the interval began (wall clock, as the instances name intervals);
	// Interval its length, the fleet's Options.Loop.ReportInterval.
	Start    time.Time
	Interval time.Duration
	// Rates are reads per second by key: the sum of the instances' reports for the
	// interval. An instance reports its ReportTop keys read at ReportMinRate or more, so a
	// key read less, or by no instance, is absent; the slow lane's averages are not added.
	Rates map[string]float64
}

// ReadFleetRates reads, without a Cache and without writing anything, the rates the Caches
// created with Options.Prefix prefix, Options.Loop.ReportInterval interval and
// Options.Loop.SummaryShards shards reported for the last complete interval, by this machine's
// clock: what the fleet reads now, where a HotMember's Rate is the rate that decided its
// change. prefix "" means DefaultPrefix, interval 0 DefaultReportInterval and shards 0
// DefaultSummaryShards; other values that no Cache accepts are refused with an error
// wrapping ErrInvalid. The summary's shards are read in one pipeline, by ctx's deadline.
func ReadFleetRates(ctx context.Context, client redis.UniversalClient, prefix string, interval time.Duration, shards int) (FleetRates, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	interval = cmp.Or(interval, DefaultReportInterval)
	shards = cmp.Or(shards, DefaultSummaryShards)
	switch {
	case len(prefix) > maxPrefixBytes || !utf8.ValidString(prefix) || slot.HasBraces(prefix):
		return FleetRates{}, invalidf("ReadFleetRates: prefix must be 1..%d bytes of UTF-8 without '{' or '}', got %q", maxPrefixBytes, prefix)
	case interval < time.Millisecond || interval > time.Hour:
		return FleetRates{}, invalidf("ReadFleetRates: interval must be 1ms..1h (the fleet's Options.Loop.ReportInterval), got %s", interval)
	case shards < 1 || shards > 1024:
		return FleetRates{}, invalidf("ReadFleetRates: shards must be 1..1024 (the fleet's Options.Loop.SummaryShards), got %d", shards)
	case client == nil:
		return FleetRates{}, invalidf("ReadFleetRates: client must not be nil")
	}
	n := time.Now().UnixNano()/int64(interval) - 1
	cmds := make([]*redis.MapStringStringCmd, shards)
	tags := fleet.SummaryTags(prefix, shards)
	_, err := bound.Do(ctx, func() ([]redis.Cmder, error) {
		return client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = p.HGetAll(ctx, tags[i]+":"+strconv.FormatInt(n, 10))
			}
			return nil
		})
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return FleetRates{}, fmt.Errorf("celebrity: read the fleet's rates under %q: %w", prefix, err)
	}
	fr := FleetRates{Prefix: prefix, Start: time.Unix(0, n*int64(interval)).UTC(), Interval: interval, Rates: map[string]float64{}}
	slow := map[string]float64{}
	for _, c := range cmds {
		fleet.ParseSummary(c.Val(), fr.Rates, fr.Rates, slow)
	}
	return fr, nil
}
