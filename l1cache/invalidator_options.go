package l1cache

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
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
	// InstanceID names this instance in its messages so that it ignores its own. It must be
	// unique among the instances. Default: 16 random hex digits. 1..64 characters of
	// [A-Za-z0-9._-].
	InstanceID string
	// PingInterval is how long the subscription may stay silent before a PING checks it; a
	// subscription silent for two intervals is replaced. It bounds the time to notice a dead
	// subscription. Default: 1s (DefaultPingInterval). Range 10ms..1m.
	PingInterval time.Duration
	// Logger receives subscription losses and malformed messages. Default: none.
	Logger *slog.Logger
}

func (o InvalidatorOptions) withDefaults() (InvalidatorOptions, error) {
	if o.Channel == "" {
		o.Channel = DefaultChannel
	}
	if len(o.Channel) > maxChannel {
		return o, fmt.Errorf("l1cache: InvalidatorOptions.Channel must be 1..%d bytes, got %d", maxChannel, len(o.Channel))
	}
	if o.InstanceID == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return o, fmt.Errorf("l1cache: generate InstanceID: %w", err)
		}
		o.InstanceID = hex.EncodeToString(b[:])
	}
	if !validInstanceID(o.InstanceID) {
		return o, fmt.Errorf("l1cache: InvalidatorOptions.InstanceID must be 1..%d characters of [A-Za-z0-9._-], got %q", maxInstanceID, o.InstanceID)
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.PingInterval < minPingInterval || o.PingInterval > maxPingInterval {
		return o, fmt.Errorf("l1cache: InvalidatorOptions.PingInterval must be %v..%v, got %v", minPingInterval, maxPingInterval, o.PingInterval)
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
