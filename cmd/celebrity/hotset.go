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

// readHotSet reads the hot set with celebrity.ReadHotSet and turns it into top's frame.
func readHotSet(ctx context.Context, c redis.UniversalClient, prefix string) (*hotSet, error) {
	got, err := celebrity.ReadHotSet(ctx, c, prefix)
	if err != nil {
		return nil, err
	}
	hs := &hotSet{Prefix: got.Prefix, Version: got.Version, Epoch: got.Epoch, Leader: got.Leader,
		LeaseMs: got.LeaseRemaining.Milliseconds(), Members: []hotMember{}, Absent: got.Empty()}
	for _, m := range got.Members {
		hs.Members = append(hs.Members, hotMember{Key: m.Key, Manual: m.Manual, Rate: m.Rate, Decided: m.Since})
	}
	for _, m := range got.Demoted {
		hs.Demoted = append(hs.Demoted, hotMember{Key: m.Key, Rate: m.Rate, Decided: m.Since})
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
