package l1cache

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Defaults applied by [NewInvalidator] to zero fields of [InvalidatorOptions].
const (
	// DefaultChannel is the default InvalidatorOptions.Channel.
	DefaultChannel = "celebrity:l1cache:invalidate"
	// DefaultPingInterval is the default InvalidatorOptions.PingInterval.
	DefaultPingInterval = time.Second
)

const (
	minPingInterval = 10 * time.Millisecond
	maxPingInterval = time.Minute
	maxInstanceID   = 64
	maxChannel      = 256
)

// InvalidatorOptions configures an [Invalidator].
type InvalidatorOptions struct {
	// Channel is the pub/sub channel shared by every instance of one cache. Default:
	// "celebrity:l1cache:invalidate" (DefaultChannel). 1..256 bytes.
	Channel string
	// InstanceID names this instance in its messages and logs. Its own messages are told
	// apart by a random nonce drawn by NewInvalidator, so two instances given the same ID
	// still invalidate each other; the clash is counted (DuplicateInstanceIDs) and logged.
	// Default: 16 random hex digits. 1..64 characters of [A-Za-z0-9._-].
	InstanceID string
	// PingInterval is how long the subscription may stay silent before a PING checks it; a
	// subscription silent for two intervals is replaced. It bounds the time to notice a dead
	// subscription, and each subscription attempt (dial included) is abandoned after two
	// intervals whatever the client's own timeouts. Default: 1s (DefaultPingInterval).
	// Range 10ms..1m.
	PingInterval time.Duration
	// OfflineFresh bounds freshness while no subscription is live: when a subscription is
	// lost the target is marked stale at once, and while none is live (before the first
	// one too) it is marked stale again every OfflineFresh, so no entry is served as fresh
	// for longer than OfflineFresh after it was loaded without a live subscription.
	// Default: PingInterval. Range 10ms..24h; negative turns the bound off (entries then
	// keep their Fresh window while the subscription is down).
	OfflineFresh time.Duration
	// PubSub chooses between sharded pub/sub (SSUBSCRIBE/SPUBLISH, Redis 7) and global
	// pub/sub (SUBSCRIBE/PUBLISH). Every instance of one cache must use the same kind.
	// Default: PubSubAuto (sharded on a *redis.ClusterClient, global otherwise).
	PubSub PubSubKind
	// Logger receives subscription failures and losses, malformed messages and messages
	// from another instance using this InstanceID. Default: none.
	Logger *slog.Logger
}

// PubSubKind selects the kind of Redis pub/sub an [Invalidator] uses.
type PubSubKind uint8

const (
	// PubSubAuto uses sharded pub/sub on a *redis.ClusterClient and global pub/sub on any
	// other client.
	PubSubAuto PubSubKind = iota
	// PubSubGlobal uses PUBLISH and SUBSCRIBE. On Redis Cluster every node relays every
	// message to every other node over the cluster bus.
	PubSubGlobal
	// PubSubSharded uses SPUBLISH and SSUBSCRIBE (Redis 7): on Redis Cluster a message
	// travels only to the nodes of the shard that owns the channel's slot. On a standalone
	// server it behaves as global pub/sub.
	PubSubSharded
)

// String returns "auto", "global" or "sharded", as operator output shows the kind.
func (k PubSubKind) String() string {
	switch k {
	case PubSubAuto:
		return "auto"
	case PubSubGlobal:
		return "global"
	case PubSubSharded:
		return "sharded"
	}
	return "PubSubKind(" + strconv.Itoa(int(k)) + ")"
}

func (o InvalidatorOptions) withDefaults() (InvalidatorOptions, error) {
	if o.Channel == "" {
		o.Channel = DefaultChannel
	}
	if len(o.Channel) > maxChannel {
		return o, invalidf("InvalidatorOptions.Channel must be 1..%d bytes, got %d", maxChannel, len(o.Channel))
	}
	if o.InstanceID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return o, fmt.Errorf("l1cache: generate InstanceID: %w", err)
		}
		o.InstanceID = hex.EncodeToString(b[:])
	}
	if !validInstanceID(o.InstanceID) {
		return o, invalidf("InvalidatorOptions.InstanceID must be 1..%d characters of [A-Za-z0-9._-], got %q", maxInstanceID, o.InstanceID)
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.PingInterval < minPingInterval || o.PingInterval > maxPingInterval {
		return o, invalidf("InvalidatorOptions.PingInterval must be %v..%v, got %v", minPingInterval, maxPingInterval, o.PingInterval)
	}
	if o.OfflineFresh == 0 {
		o.OfflineFresh = o.PingInterval
	}
	if o.OfflineFresh > 0 && (o.OfflineFresh < minPingInterval || o.OfflineFresh > maxDuration) {
		return o, invalidf("InvalidatorOptions.OfflineFresh must be %v..%v or negative (off), got %v", minPingInterval, maxDuration, o.OfflineFresh)
	}
	if o.PubSub > PubSubSharded {
		return o, invalidf("InvalidatorOptions.PubSub must be PubSubAuto, PubSubGlobal or PubSubSharded, got %d", o.PubSub)
	}
	return o, nil
}

func validInstanceID(id string) bool {
	if len(id) == 0 || len(id) > maxInstanceID {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}
