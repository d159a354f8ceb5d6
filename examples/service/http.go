package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/stripes"
)

// Deadline bounds every request the service serves: each handler's calls share it.
const Deadline = 500 * time.Millisecond

// service is the HTTP service: posts read through the cache, written to the store then
// Set; views counted per post; payments limited per merchant.
type service struct {
	store    *store
	posts    *celebrity.Cache[Post]
	views    *stripes.Family
	payments *ratelimit.Limiter
	log      *slog.Logger
}

func postKey(id string) string { return "post:" + id }
func postID(key string) string { return strings.TrimPrefix(key, "post:") }

func (s *service) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /posts/{id}", s.timed(s.getPost))
	mux.HandleFunc("PUT /posts/{id}", s.timed(s.putPost))
	mux.HandleFunc("POST /posts/{id}/views", s.timed(s.addView))
	mux.HandleFunc("GET /posts/{id}/views", s.timed(s.getViews))
	mux.HandleFunc("POST /merchants/{id}/payments", s.timed(s.pay))
}

// timed logs a request that took longer than its deadline and 50 ms.
func (s *service) timed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h(w, r)
		if took := time.Since(start); took > Deadline+50*time.Millisecond {
			s.log.Warn("slow request", "method", r.Method, "path", r.URL.Path, "took_ms", took.Milliseconds(),
				"start_us", start.UnixMicro())
		}
	}
}

func (s *service) getPost(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), Deadline)
	defer cancel()
	p, err := s.posts.Get(ctx, postKey(r.PathValue("id")))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply(w, http.StatusOK, p)
}

// putPost writes the store, then tells the cache (Set), the order the cache documents.
func (s *service) putPost(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), Deadline)
	defer cancel()
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	p, err := s.store.put(ctx, id, string(body))
	if err == nil {
		err = s.posts.Set(ctx, postKey(id), p, p.Version)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply(w, http.StatusOK, p)
}

// viewReply says whether a view was counted by this call and where it lives.
type viewReply struct {
	Applied bool   `json:"applied"`
	Gen     uint64 `json:"gen"`
	Stripe  int    `json:"stripe"`
}

// addView counts view ?event=ID that happened at ?at=unix milliseconds once, however often
// the client retries it.
func (s *service) addView(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), Deadline)
	defer cancel()
	q := r.URL.Query()
	at, err := strconv.ParseInt(q.Get("at"), 10, 64)
	if err != nil || q.Get("event") == "" {
		reply(w, http.StatusBadRequest, map[string]string{"error": "need ?event=ID&at=unix-ms"})
		return
	}
	res, err := s.views.Add(ctx, postKey(r.PathValue("id")),
		stripes.Event{ID: q.Get("event"), Time: time.UnixMilli(at)}, 1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply(w, http.StatusOK, viewReply{Applied: res.Applied, Gen: res.Gen, Stripe: res.Stripe})
}

func (s *service) getViews(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), Deadline)
	defer cancel()
	n, err := s.views.Sum(ctx, postKey(r.PathValue("id")))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reply(w, http.StatusOK, map[string]int64{"views": n})
}

// payReply says whether a payment was admitted and when the limiter decided (unix µs).
type payReply struct {
	Allowed bool  `json:"allowed"`
	At      int64 `json:"at_us"`
}

func (s *service) pay(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), Deadline)
	defer cancel()
	res, err := s.payments.Allow(ctx, "merchant:"+r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := payReply{Allowed: res.Allowed, At: time.Now().UnixMicro()}
	if !res.Allowed {
		w.Header().Set("Retry-After", strconv.Itoa(int(res.RetryAfter.Seconds())+1))
		reply(w, http.StatusTooManyRequests, out)
		return
	}
	reply(w, http.StatusOK, out)
}

func (s *service) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, celebrity.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	default:
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	reply(w, code, map[string]string{"error": err.Error()})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
