package migrate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/routing"
)

// Every bad option is refused by withDefaults with an error that wraps ErrInvalid and names
// the field; no Redis is needed to check it.
func TestBadOptionsWrapErrInvalidAndNameTheField(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = cl.Close() })
	shards := map[string]ShardClient{"a": cl}
	for _, tc := range []struct {
		field string
		o     Options
	}{
		{"Options.Shards", Options{}},
		{"Options.Shards", Options{Shards: map[string]ShardClient{"": cl}}},
		{"Options.Prefix", Options{Shards: shards, Prefix: "a}b"}},
		{"Options.BatchSize", Options{Shards: shards, BatchSize: 10001}},
		{"Options.CloseLag", Options{Shards: shards, CloseLag: -1}},
		{"Options.MaxCatchUpRounds", Options{Shards: shards, MaxCatchUpRounds: -1}},
		{"Options.Grace", Options{Shards: shards, Grace: -time.Second}},
		{"Options.LeaseTTL", Options{Shards: shards, LeaseTTL: time.Millisecond}},
		{"Options.TombstoneRetention", Options{Shards: shards, TombstoneRetention: -1}},
		{"Options.OpRetention", Options{Shards: shards, OpRetention: -1}},
		{"Options.OpRetryWindow", Options{Shards: shards, OpRetryWindow: 2 * routingDefaultOpRetention()}},
	} {
		_, err := tc.o.withDefaults()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalid naming the field", tc.field, err)
		}
	}
	for _, tc := range []struct {
		field string
		o     CacheOptions
	}{
		{"CacheOptions.Shards", CacheOptions{}},
		{"CacheOptions.Prefix", CacheOptions{Shards: map[string]ShardClient{"a": cl}, Prefix: "{x"}},
		{"CacheOptions.RollbackWindow", CacheOptions{Shards: map[string]ShardClient{"a": cl}, RollbackWindow: 25 * time.Hour}},
	} {
		_, err := tc.o.withDefaults()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want an error wrapping ErrInvalid naming the field", tc.field, err)
		}
	}
	if _, err := New(nil, Options{Shards: shards}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New(nil control): got %v, want ErrInvalid", err)
	}
}

// The zero fields get the documented defaults, and the value passed in is not changed.
func TestOptionsDefaults(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = cl.Close() })
	in := Options{Shards: map[string]ShardClient{"a": cl}}
	o, err := in.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.BatchSize != DefaultBatchSize || o.CloseLag != DefaultCloseLag || o.MaxCatchUpRounds != DefaultMaxCatchUpRounds ||
		o.Grace != DefaultGrace || o.LeaseTTL != DefaultLeaseTTL || o.OpRetryWindow != o.OpRetention ||
		o.OpRetention != routingDefaultOpRetention() || o.Clock == nil || o.NewID == nil || o.Prefix == "" {
		t.Errorf("defaults not filled: %+v", o)
	}
	if in.BatchSize != 0 || in.Clock != nil {
		t.Errorf("withDefaults changed its receiver: %+v", in)
	}
}

func routingDefaultOpRetention() time.Duration { return routing.DefaultOpRetention }

// Clock is used when set; time.Now otherwise.
func TestClockFallsBackToTimeNow(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = cl.Close() })
	clock := func() time.Time { return time.Unix(1, 0) }
	o, err := Options{Shards: map[string]ShardClient{"a": cl}, Clock: clock}.withDefaults()
	if err != nil || o.Clock().Unix() != 1 {
		t.Errorf("Options: got %v; want the clock", err)
	}
	co, err := CacheOptions{Shards: map[string]ShardClient{"a": cl}, Clock: clock}.withDefaults()
	if err != nil || co.Clock().Unix() != 1 {
		t.Errorf("CacheOptions: got %v; want the clock", err)
	}
	o, err = Options{Shards: map[string]ShardClient{"a": cl}}.withDefaults()
	if err != nil || o.Clock().Before(time.Unix(1e9, 0)) {
		t.Errorf("default clock: got %v; want time.Now", err)
	}
}
