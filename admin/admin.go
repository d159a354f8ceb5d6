// Package admin serves the library's state as JSON on a host's admin port: the hot set and
// promoted keys, L1 and lease statistics, the route table's generation, migrations in flight,
// escrow audits — whatever the host hands it, one section each.
//
//	mux.Handle("/debug/celebrity/", http.StripPrefix("/debug/celebrity", admin.Must(admin.Options{
//		Sections: map[string]admin.Section{
//			"l1":     admin.Stats(cache),
//			"routes": func(ctx context.Context) (any, error) { return router.Table(), nil },
//			"escrow": func(ctx context.Context) (any, error) { return pool.Audit(ctx) },
//		},
//	})))
//
// admin.Cache(c) is the ready section of a celebrity.Cache: its hot set as the fleet
// published it, the effective options and the stats. Every reply is in the shape Shape
// describes (snake_case keys, durations and errors as text), the one the celebrity CLI
// prints with --json.
//
// GET / lists the sections; GET /NAME returns one section's snapshot; GET /?all=1 returns
// every section at once. The handler is read-only: it answers every other method with 405,
// unless the host registers Actions, which are served only as POST /actions/NAME. A section
// that fails answers 502 with the error's text; one that takes longer than Options.Timeout
// answers 504. The handler holds no goroutines and no state beyond its options.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error New returns for bad options.
var ErrInvalid = errors.New("admin: invalid options")

// DefaultTimeout bounds one section or action when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Section returns a JSON-encodable snapshot of one component. It runs on the request's
// goroutine with a context bounded by Options.Timeout and must not change anything.
type Section func(ctx context.Context) (any, error)

// Action changes something on an operator's request (a manual promote, a migration cancel).
// It gets the request (to read its query or body) and returns a JSON-encodable result.
type Action func(ctx context.Context, r *http.Request) (any, error)

// Options configure the handler.
type Options struct {
	// Sections name the read-only snapshots the handler serves. Names are 1..64 bytes of
	// [a-z0-9_-]. Required: at least one.
	Sections map[string]Section
	// Actions name the changes an operator may make through POST /actions/NAME. Default:
	// none (the handler is read-only).
	Actions map[string]Action
	// Timeout bounds each section and action. Default: DefaultTimeout; negative: no bound
	// beyond the request's own context.
	Timeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if len(o.Sections) == 0 {
		return o, fmt.Errorf("%w: Options.Sections must name at least one section", ErrInvalid)
	}
	for name, s := range o.Sections {
		if err := checkName("Sections", name, s == nil); err != nil {
			return o, err
		}
	}
	for name, a := range o.Actions {
		if err := checkName("Actions", name, a == nil); err != nil {
			return o, err
		}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o, nil
}

func checkName(field, name string, isNil bool) error {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		return fmt.Errorf("%w: Options.%s name %q must be 1..64 bytes of [a-z0-9_-]", ErrInvalid, field, name)
	}
	if isNil {
		return fmt.Errorf("%w: Options.%s[%q] is nil", ErrInvalid, field, name)
	}
	return nil
}

// Handler is the admin http.Handler. It is safe for concurrent use.
type Handler struct {
	o Options
}

// New returns a handler serving o's sections and actions.
func New(o Options) (*Handler, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Handler{o: o}, nil
}

// Must is New that panics on bad options, for wiring at program start.
func Must(o Options) *Handler {
	h, err := New(o)
	if err != nil {
		panic(err)
	}
	return h
}

// Stats adapts any component with a Stats method (every package of the library has one)
// into a Section. Its snapshot is served in the shape Shape describes.
func Stats[T any](c interface{ Stats() T }) Section {
	return func(context.Context) (any, error) { return c.Stats(), nil }
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Trim(r.URL.Path, "/")
	if name, ok := strings.CutPrefix(path, "actions/"); ok {
		h.serveAction(w, r, name)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "read-only: %s %s is not allowed", r.Method, r.URL.Path)
		return
	}
	if path == "" {
		h.serveIndex(w, r)
		return
	}
	s, ok := h.o.Sections[path]
	if !ok {
		writeError(w, http.StatusNotFound, "no section %q (GET / lists them)", path)
		return
	}
	v, err := h.call(r.Context(), func(ctx context.Context) (any, error) { return s(ctx) })
	writeResult(w, v, err)
}

func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	names := sortedNames(h.o.Sections)
	if r.URL.Query().Get("all") == "" {
		writeJSON(w, http.StatusOK, map[string]any{"sections": names, "actions": sortedNames(h.o.Actions)})
		return
	}
	out := make(map[string]any, len(names))
	for _, name := range names {
		s := h.o.Sections[name]
		v, err := h.call(r.Context(), func(ctx context.Context) (any, error) { return s(ctx) })
		if err != nil {
			v = map[string]string{"error": err.Error()}
		}
		out[name] = v
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) serveAction(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := h.o.Actions[name]
	if !ok {
		writeError(w, http.StatusNotFound, "no action %q (the host enabled %d action(s))", name, len(h.o.Actions))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "action %q needs POST", name)
		return
	}
	v, err := h.call(r.Context(), func(ctx context.Context) (any, error) { return a(ctx, r) })
	writeResult(w, v, err)
}

func (h *Handler) call(ctx context.Context, f func(context.Context) (any, error)) (any, error) {
	if h.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.o.Timeout)
		defer cancel()
	}
	return f(ctx)
}

func writeResult(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "%v", err)
	case err != nil:
		writeError(w, http.StatusBadGateway, "%v", err)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func writeError(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, a...)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(Shape(v), "", "  ")
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(fmt.Sprintf(`{"error": %q}`, "encode: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
