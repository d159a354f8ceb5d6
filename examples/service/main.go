// Command service is a small HTTP service as a social or payments team would write it over
// the library, with go-redis's stock options and the library's documented defaults:
//
//	GET  /posts/{id}                 a post, read through a celebrity.Cache from a slow versioned store
//	PUT  /posts/{id}                 writes the store, then Cache.Set
//	POST /posts/{id}/views?event=ID&at=MS   counts a view once (stripes.Family), however often retried
//	GET  /posts/{id}/views           the post's view count
//	POST /merchants/{id}/payments    a payment, under the merchant's rate limit (ratelimit, Leased)
//	GET  /admin/                     the admin handler (each component's Stats)
//	GET  /metrics                    Prometheus metrics (contrib/prometheus)
//
// Every request has a deadline of 500 ms. With -listen it serves until SIGINT or SIGTERM
// (the game day in gameday_test.go runs several such processes on a Redis Cluster and
// injects faults). Without it, it serves on a loopback port, calls each endpoint as a
// client would, checks what came back, and exits non-zero if a check failed.
//
//	go run ./service                                       # embedded in-process Redis
//	REDIS_CLUSTER_ADDRS=127.0.0.1:7000 go run ./service -listen 127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/celebrity-go/celebrity/examples/internal/redisenv"
)

func main() {
	listen := flag.String("listen", "", "serve on this address until SIGINT/SIGTERM (default: a self-check on a loopback port)")
	latency := flag.Duration("store-latency", 5*time.Millisecond, "the store's artificial latency per call")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(*listen, *latency, log); err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		os.Exit(1)
	}
}

func run(listen string, latency time.Duration, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := redisenv.Connect(ctx, redisenv.Options{EmbeddedServers: 3})
	if err != nil {
		return err
	}
	defer t.Close()
	s, err := newService(t, latency, log)
	if err != nil {
		return err
	}
	defer s.close()
	mux := http.NewServeMux()
	s.routes(mux)
	if err := mountOps(mux, s.posts, s.views, s.payments); err != nil {
		return err
	}
	addr := listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if listen == "" {
		fmt.Printf("service: self-check against %s\n", t.Desc)
		return selfCheck(ctx, "http://"+ln.Addr().String())
	}
	log.Info("serving", "addr", ln.Addr().String(), "redis", t.Desc)
	<-ctx.Done()
	return nil
}

func newService(t *redisenv.Target, latency time.Duration, log *slog.Logger) (s *service, err error) {
	s = &service{store: &store{rdb: t.Client, latency: latency}, log: log}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.posts, err = newPosts(t.Client, t.Kind == redisenv.Embedded, s.store, log); err != nil {
		return nil, err
	}
	if s.views, err = newViews(t.Client); err != nil {
		return nil, err
	}
	if s.payments, err = newPayments(t.Client, log); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *service) close() {
	var errs []error
	if s.posts != nil {
		errs = append(errs, s.posts.Close())
	}
	if s.views != nil {
		errs = append(errs, s.views.Close())
	}
	if s.payments != nil {
		errs = append(errs, s.payments.Close())
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("close", "err", err)
	}
}
