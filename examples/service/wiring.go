package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/admin"
	celebrityprom "github.com/celebrity-go/celebrity/contrib/prometheus"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/stripes"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// This file is the one place where each component of the service is wired: every option
// the service chooses is here, every other option is the library's documented default.

// MerchantLimit is every merchant's payment rate limit.
var MerchantLimit = ratelimit.Limit{Rate: 100, Period: time.Second}

// ViewsHotRate is the write rate (views counted per second by the whole fleet: every
// process's Family reports its share to a count they share) at which a post's view counter
// is spread over ViewsHotStripes stripes. A post viewed 100 times a second is a small part
// of one master's capacity, but the fleet's hottest counters are the ones to spread before
// they become its hottest key.
const (
	ViewsHotRate    = 100
	ViewsHotStripes = 6
)

// newPosts wires the posts cache: a read-through celebrity.Cache over the store, with the
// default options (on the embedded servers, which have no sharded pub/sub, invalidations
// go over plain pub/sub). OnEvent logs each hot-set change this process applies.
func newPosts(rdb redis.UniversalClient, embedded bool, st *store, log *slog.Logger) (*celebrity.Cache[Post], error) {
	pubsub := l1cache.PubSubAuto
	if embedded {
		pubsub = l1cache.PubSubGlobal
	}
	return celebrity.New(rdb, func(ctx context.Context, key string) (celebrity.Versioned[Post], error) {
		p, version, err := st.get(ctx, postID(key))
		return celebrity.Versioned[Post]{Value: p, Version: version}, err
	}, celebrity.Options[Post]{
		PubSub: pubsub,
		Logger: log,
		OnEvent: func(e celebrity.Event) {
			log.Info("hot set", "kind", e.Kind.String(), "key", e.Key, "rate", e.Rate,
				"manual", e.Manual, "version", e.HotVersion, "at_us", e.At.UnixMicro())
		},
	})
}

// newViews wires the view counters: one stripes.Family, a name per post, spread over
// ViewsHotStripes stripes when its write rate reaches ViewsHotRate.
func newViews(rdb redis.UniversalClient) (*stripes.Family, error) {
	return stripes.NewFamily(rdb, stripes.FamilyOptions{HotStripes: ViewsHotStripes, HotRate: ViewsHotRate})
}

// newPayments wires the per-merchant rate limit in Leased mode, the mode the README
// recommends for a merchant whose limit key is hot: never over the limit, Redis load set by
// chunks rather than by requests.
func newPayments(rdb redis.UniversalClient, log *slog.Logger) (*ratelimit.Limiter, error) {
	return ratelimit.New(rdb, ratelimit.Options{Limit: MerchantLimit, Mode: ratelimit.Leased, Logger: log})
}

// mountOps mounts the operator endpoints: the admin handler under /admin/ and the
// Prometheus metrics under /metrics.
func mountOps(mux *http.ServeMux, posts *celebrity.Cache[Post], views *stripes.Family, payments *ratelimit.Limiter) error {
	reg := prometheus.NewRegistry()
	if _, err := celebrityprom.Cache(reg, posts, celebrityprom.Options{Name: "posts"}); err != nil {
		return err
	}
	if _, err := celebrityprom.StripesFamily(reg, views, celebrityprom.Options{Name: "views"}); err != nil {
		return err
	}
	if _, err := celebrityprom.Ratelimit(reg, payments, celebrityprom.Options{Name: "payments"}); err != nil {
		return err
	}
	adm, err := admin.New(admin.Options{Sections: map[string]admin.Section{
		"posts":    admin.Cache(posts),
		"views":    admin.Stats(views),
		"payments": admin.Stats(payments),
	}})
	if err != nil {
		return err
	}
	mux.Handle("/admin/", http.StripPrefix("/admin", adm))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return nil
}
