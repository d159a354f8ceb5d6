package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

// hotSet is the fleet's hot set as celebrity.ReadHotSet reports it: the keys every
// instance serves from copies, who leads the fleet loop, and the keys demoted lately.
type hotSet struct {
	Prefix  string      `json:"prefix"`
	Version uint64      `json:"version"`
	Epoch   uint64      `json:"epoch"`
	Leader  string      `json:"leader,omitempty"`
	LeaseMs int64       `json:"leader_lease_ms,omitempty"`
	Members []hotMember `json:"members"`
	// Demoted are the demotions decided within DemotedWithin (--demoted).
	Demoted       []hotMember `json:"demoted,omitempty"`
	DemotedWithin string      `json:"demoted_within"` // a duration's text, as admin.Shape writes one
	// RatesFrom and RatesInterval are the report interval the members' NowRate were
	// summed over (the last complete one); RatesError is why they could not be read.
	RatesFrom     time.Time `json:"rates_from"`
	RatesInterval string    `json:"rates_interval"`
	RatesError    string    `json:"rates_error,omitempty"`
	// Absent is set when no fleet ever wrote a hot set under Prefix.
	Absent bool `json:"absent,omitempty"`
}

// hotMember is one key of the hot set (or of the recent demotions). Rates are fleet-wide
// Redis-level reads per second (Gets that missed the instances' L1, as the instances report
// them, summed): Rate is the one that decided the change, NowRate the one of the last
// complete report interval (0 when no instance reported the key in it).
type hotMember struct {
	Key     string    `json:"key"`
	Manual  bool      `json:"manual,omitempty"`
	Rate    float64   `json:"rate_at_decision"`
	NowRate float64   `json:"rate_now"`
	Decided time.Time `json:"decided"`
}

// hotSetQuery says which fleet top reads: its prefix and the options its rates depend on.
type hotSetQuery struct {
	prefix         string
	reportInterval time.Duration
	summaryShards  int
	demotedWithin  time.Duration
}

// readHotSet reads the hot set with celebrity.ReadHotSet and the fleet's current rates with
// celebrity.ReadFleetRates, and turns them into top's frame.
func readHotSet(ctx context.Context, c redis.UniversalClient, q hotSetQuery) (*hotSet, error) {
	got, err := celebrity.ReadHotSet(ctx, c, q.prefix)
	if err != nil {
		return nil, err
	}
	hs := &hotSet{Prefix: got.Prefix, Version: got.Version, Epoch: got.Epoch, Leader: got.Leader,
		LeaseMs: got.LeaseRemaining.Milliseconds(), Members: []hotMember{}, Absent: got.Empty(),
		DemotedWithin: q.demotedWithin.String(), RatesInterval: q.reportInterval.String()}
	rates, err := celebrity.ReadFleetRates(ctx, c, q.prefix, q.reportInterval, q.summaryShards)
	if err != nil {
		hs.RatesError = err.Error()
	}
	hs.RatesFrom = rates.Start
	for _, m := range got.Members {
		hs.Members = append(hs.Members, hotMember{Key: m.Key, Manual: m.Manual, Rate: m.Rate, NowRate: rates.Rates[m.Key], Decided: m.Since})
	}
	for _, m := range got.Demoted {
		if q.demotedWithin > 0 && (m.Since.IsZero() || time.Since(m.Since) <= q.demotedWithin) {
			hs.Demoted = append(hs.Demoted, hotMember{Key: m.Key, Rate: m.Rate, NowRate: rates.Rates[m.Key], Decided: m.Since})
		}
	}
	return hs, nil
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
	now := "rate now: fleet reads/s in the report interval from " + hhmmss(hs.RatesFrom)
	if hs.RatesError != "" {
		now = "rate now unknown: " + hs.RatesError
	}
	fmt.Fprintf(b, "  %-32s %-7s %12s %12s  %s\n", "KEY", "BY", "AT DECISION", "NOW", "SINCE")
	for _, m := range hs.Members {
		how := "fleet"
		if m.Manual {
			how = "manual"
		}
		fmt.Fprintf(b, "  %-32s %-7s %12.1f %12s  %s\n", m.Key, how, m.Rate, nowRate(hs, m), hhmmss(m.Decided))
	}
	if len(hs.Demoted) > 0 {
		fmt.Fprintf(b, "  demoted in the last %s:\n", hs.DemotedWithin)
	}
	for _, m := range hs.Demoted {
		fmt.Fprintf(b, "  %-32s %-7s %12.1f %12s  %s\n", m.Key, "demoted", m.Rate, nowRate(hs, m), hhmmss(m.Decided))
	}
	fmt.Fprintf(b, "  rates: Redis-level reads/s (L1 misses) the instances report, summed over the fleet; %s\n", now)
}

func nowRate(hs *hotSet, m hotMember) string {
	if hs.RatesError != "" {
		return "?"
	}
	return fmt.Sprintf("%.1f", m.NowRate)
}

func hhmmss(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("15:04:05")
}
