package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// hotSet is the fleet's hot set as a celebrity.Cache fleet keeps it in Redis (the root
// package doc's "Key layout"): the keys every instance serves from copies, who leads the
// fleet loop, and the keys demoted lately.
type hotSet struct {
	Prefix  string      `json:"prefix"`
	Version uint64      `json:"version"`
	Epoch   uint64      `json:"epoch"`
	Leader  string      `json:"leader,omitempty"`
	LeaseMs int64       `json:"leader_lease_ms,omitempty"`
	Members []hotMember `json:"members"`
	Demoted []hotMember `json:"demoted,omitempty"`
	// Absent is set when no fleet ever wrote a hot set under Prefix.
	Absent bool `json:"absent,omitempty"`
}

// hotMember is one key of the hot set (or of the recent demotions): the fleet-wide rate of
// Redis-level reads that decided the change, and when it was decided.
type hotMember struct {
	Key     string    `json:"key"`
	Manual  bool      `json:"manual,omitempty"`
	Rate    float64   `json:"rate"`
	Decided time.Time `json:"decided"`
}

// hotKeys names the fleet's hot-set keys under a cache prefix (one slot).
func hotKeys(prefix string) (meta, leader, members, demoted string) {
	p := prefix + "{" + prefix + "hot}"
	return p + "meta", p + "leader", p + "members", p + "demoted"
}

// readHotSet reads the hot set in one MULTI/EXEC (its keys share one slot), so the members
// are those of the version returned.
func readHotSet(ctx context.Context, c redis.UniversalClient, prefix string) (*hotSet, error) {
	meta, leader, members, demoted := hotKeys(prefix)
	var mc, dc *redis.MapStringStringCmd
	var vc *redis.SliceCmd
	var lc *redis.StringCmd
	var tc *redis.DurationCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		vc = p.HMGet(ctx, meta, "version", "epoch")
		lc = p.Get(ctx, leader)
		tc = p.PTTL(ctx, leader)
		mc = p.HGetAll(ctx, members)
		dc = p.HGetAll(ctx, demoted)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read the fleet hot set under %q: %w", prefix, err)
	}
	hs := &hotSet{Prefix: prefix, Members: []hotMember{}}
	vals := vc.Val()
	if len(vals) == 2 {
		hs.Version, _ = strconv.ParseUint(fmt.Sprint(vals[0]), 10, 64)
		hs.Epoch, _ = strconv.ParseUint(fmt.Sprint(vals[1]), 10, 64)
	}
	hs.Leader = lc.Val()
	if hs.Leader != "" && tc.Val() > 0 {
		hs.LeaseMs = tc.Val().Milliseconds()
	}
	for k, v := range mc.Val() {
		parts := strings.SplitN(v, "|", 3)
		m := hotMember{Key: k}
		if len(parts) == 3 {
			m.Manual = parts[0] == "m"
			m.Rate, m.Decided = parseRateAt(parts[1], parts[2])
		}
		hs.Members = append(hs.Members, m)
	}
	for k, v := range dc.Val() {
		rate, at, _ := strings.Cut(v, "|")
		m := hotMember{Key: k}
		m.Rate, m.Decided = parseRateAt(rate, at)
		hs.Demoted = append(hs.Demoted, m)
	}
	byRate := func(ms []hotMember) {
		sort.Slice(ms, func(i, j int) bool {
			if ms[i].Rate != ms[j].Rate {
				return ms[i].Rate > ms[j].Rate
			}
			return ms[i].Key < ms[j].Key
		})
	}
	byRate(hs.Members)
	byRate(hs.Demoted)
	hs.Absent = hs.Version == 0 && hs.Leader == "" && len(hs.Members) == 0 && len(hs.Demoted) == 0
	return hs, nil
}

func parseRateAt(rate, ms string) (float64, time.Time) {
	r, _ := strconv.ParseFloat(rate, 64)
	var at time.Time
	if n, err := strconv.ParseInt(ms, 10, 64); err == nil && n > 0 {
		at = time.UnixMilli(n).UTC()
	}
	return r, at
}

// renderHotSet draws the hot set under top's node bars.
func renderHotSet(b *strings.Builder, hs *hotSet) {
	if hs.Absent {
		fmt.Fprintf(b, "\nfleet hot set (%s): none (no celebrity.Cache fleet under this prefix)\n", hs.Prefix)
		return
	}
	leader := "no leader"
	if hs.Leader != "" {
		leader = fmt.Sprintf("leader %s (epoch %d, lease %.1fs left)", hs.Leader, hs.Epoch, float64(hs.LeaseMs)/1000)
	}
	fmt.Fprintf(b, "\nfleet hot set (%s): version %d, %d key(s), %s\n", hs.Prefix, hs.Version, len(hs.Members), leader)
	for _, m := range hs.Members {
		how := "fleet "
		if m.Manual {
			how = "manual"
		}
		fmt.Fprintf(b, "  %-32s %s %10.1f reads/s  since %s\n", m.Key, how, m.Rate, hhmmss(m.Decided))
	}
	for _, m := range hs.Demoted {
		fmt.Fprintf(b, "  demoted %-24s         %10.1f reads/s  at    %s\n", m.Key, m.Rate, hhmmss(m.Decided))
	}
}

func hhmmss(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("15:04:05")
}
