package celebrity

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/fleet"
	"github.com/celebrity-go/celebrity/internal/slot"
)

// HotSet is the hot set a fleet of Caches publishes in Redis under one prefix, as
// ReadHotSet reads it: the keys every instance serves from copies, the leader of the fleet
// loop, and the keys demoted lately.
type HotSet struct {
	// Prefix is the Options.Prefix the hot set was read under.
	Prefix string
	// Version grows by one with every change of the members; 0 if no change was ever made.
	Version uint64
	// Epoch is the epoch of the latest leader; it grows with every change of leader.
	Epoch uint64
	// Leader is the instance ID holding the leader lease, or "" if no instance holds it.
	Leader string
	// LeaseRemaining is how long the leader's lease lasts unless renewed (0 without leader).
	LeaseRemaining time.Duration
	// Members are the keys of the hot set, highest rate first (then by key).
	Members []HotMember
	// Demoted are the keys demoted lately (they are forgotten a while after the last
	// demotion), highest rate first (then by key).
	Demoted []HotMember
}

// HotMember is one key of a HotSet's members or recent demotions.
type HotMember struct {
	// Key is the logical key.
	Key string
	// Manual is set for a member promoted by hand (Cache.Promote); the fleet never demotes
	// it. It is false for a member the fleet promoted, and for a demotion.
	Manual bool
	// Rate is the fleet-wide rate of Redis-level reads (per second) that decided the change;
	// 0 for a change made by hand.
	Rate float64
	// Since is when the change was decided (promotion for a member, demotion otherwise); the
	// zero Time if the record does not say.
	Since time.Time
}

// Empty reports whether no fleet ever wrote a hot set under the prefix: no version, no
// leader, no members and no recent demotions.
func (h HotSet) Empty() bool {
	return h.Version == 0 && h.Leader == "" && len(h.Members) == 0 && len(h.Demoted) == 0
}

// ReadHotSet reads the hot set that the Caches created with Options.Prefix prefix publish
// through client (a *redis.Client or a *redis.ClusterClient), without a Cache and without
// writing anything. prefix "" means DefaultPrefix; like Options.Prefix it must be 1..128
// bytes of UTF-8 without '{' or '}', or the error wraps ErrInvalid. The hot set's keys share
// one hash slot and are read in one MULTI/EXEC, so the members are those of the version
// returned. A prefix no fleet ever used gives an Empty HotSet and no error.
func ReadHotSet(ctx context.Context, client redis.UniversalClient, prefix string) (HotSet, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if len(prefix) > maxPrefixBytes || !utf8.ValidString(prefix) || slot.HasBraces(prefix) {
		return HotSet{}, invalidf("ReadHotSet: prefix must be 1..%d bytes of UTF-8 without '{' or '}', got %q", maxPrefixBytes, prefix)
	}
	if client == nil {
		return HotSet{}, invalidf("ReadHotSet: client must not be nil")
	}
	raw, err := readRawHotSet(ctx, client, fleet.Keys(prefix))
	if err != nil {
		return HotSet{}, fmt.Errorf("celebrity: read the hot set under %q: %w", prefix, err)
	}
	return raw.hotSet(prefix), nil
}

// rawHotSet is the hot set's records as Redis holds them.
type rawHotSet struct {
	version, epoch, leader string
	lease                  time.Duration // the leader lease's PTTL
	members, demoted       map[string]string
}

// readRawHotSet reads the hot set's keys in one MULTI/EXEC (they share one slot).
func readRawHotSet(ctx context.Context, client redis.UniversalClient, ks fleet.Keyset) (rawHotSet, error) {
	var (
		vc, ec, lc *redis.StringCmd
		tc         *redis.DurationCmd
		mc, dc     *redis.MapStringStringCmd
	)
	_, err := bound.Do(ctx, func() ([]redis.Cmder, error) {
		return client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			vc = p.HGet(ctx, ks.Meta, "version") // HGET, not HMGET: the package doc's ACL
			ec = p.HGet(ctx, ks.Meta, "epoch")
			lc = p.Get(ctx, ks.Lease)
			tc = p.PTTL(ctx, ks.Lease)
			mc = p.HGetAll(ctx, ks.Members)
			dc = p.HGetAll(ctx, ks.Demoted)
			return nil
		})
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return rawHotSet{}, err
	}
	return rawHotSet{version: vc.Val(), epoch: ec.Val(), leader: lc.Val(), lease: tc.Val(),
		members: mc.Val(), demoted: dc.Val()}, nil
}

// hotSet parses the records into a HotSet. It is pure.
func (r rawHotSet) hotSet(prefix string) HotSet {
	hs := HotSet{Prefix: prefix, Members: []HotMember{}, Demoted: []HotMember{}}
	hs.Version, _ = strconv.ParseUint(r.version, 10, 64)
	hs.Epoch, _ = strconv.ParseUint(r.epoch, 10, 64)
	hs.Leader, _, _ = strings.Cut(r.leader, "/") // "<InstanceID>/<nonce>"
	if hs.Leader != "" && r.lease > 0 {
		hs.LeaseRemaining = r.lease
	}
	for k, m := range fleet.ParseMembers(r.members) {
		hs.Members = append(hs.Members, HotMember{Key: k, Manual: m.Manual, Rate: m.Rate, Since: utcOrZero(m.Since)})
	}
	for k, v := range r.demoted {
		rate, at, _ := strings.Cut(v, "|")
		d := HotMember{Key: k}
		d.Rate, _ = strconv.ParseFloat(rate, 64)
		if ms, err := strconv.ParseInt(at, 10, 64); err == nil && ms > 0 {
			d.Since = time.UnixMilli(ms).UTC()
		}
		hs.Demoted = append(hs.Demoted, d)
	}
	sortByRate(hs.Members)
	sortByRate(hs.Demoted)
	return hs
}

func utcOrZero(t time.Time) time.Time {
	if t.IsZero() || t.UnixMilli() <= 0 {
		return time.Time{}
	}
	return t.UTC()
}

func sortByRate(ms []HotMember) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Rate != ms[j].Rate {
			return ms[i].Rate > ms[j].Rate
		}
		return ms[i].Key < ms[j].Key
	})
}
