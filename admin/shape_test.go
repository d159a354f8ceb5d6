package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/admin"
	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got)
}

func shaped(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(admin.Shape(v), "", "  ")
	require.NoError(t, err)
	return string(b)
}

// TestShapeNamesWhatOperatorsRead pins the shape of the values that used to read badly: an
// error rendered as {}, a duration in nanoseconds, a CamelCase key, 32 per-copy counters.
func TestShapeNamesWhatOperatorsRead(t *testing.T) {
	inv := l1cache.InvalidatorStats{Losses: 2, LastError: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}
	require.JSONEq(t, `{"published":0,"publish_errors":0,"received":0,"ignored":0,"duplicate_instance_ids":0,
		"malformed":0,"subscriptions":0,"subscribe_failures":0,"losses":2,"offline_marks":0,"subscribed":false,
		"sharded":false,"last_error":"dial tcp 127.0.0.1:1: connect: connection refused"}`, shaped(t, inv))
	require.Contains(t, shaped(t, l1cache.InvalidatorStats{}), `"last_error": null`)

	var rep replicas.Stats
	require.Contains(t, shaped(t, rep), `"copy_reads": []`, "no copy read: no per-copy list")
	rep.CopyReads[0], rep.CopyReads[2] = 5, 7
	require.Contains(t, shaped(t, rep), "\"copy_reads\": [\n    5,\n    0,\n    7\n  ]")

	hs := celebrity.HotSet{Prefix: "p:", LeaseRemaining: 2109 * time.Millisecond,
		Members: []celebrity.HotMember{{Key: "post:7", Rate: 1500, Since: time.Date(2026, 12, 4, 13, 0, 0, 0, time.UTC)}}}
	require.JSONEq(t, `{"prefix":"p:","version":0,"epoch":0,"leader":"","lease_remaining":"2.109s",
		"members":[{"key":"post:7","manual":false,"rate":1500,"since":"2026-12-04T13:00:00Z"}],"demoted":[]}`, shaped(t, hs))

	type tagged struct {
		Name    string `json:"name"`
		Skipped int    `json:"-"`
		Empty   string `json:"empty,omitempty"`
		Hook    func()
		Kind    celebrity.EventKind
	}
	require.JSONEq(t, `{"name":"a","kind":"promoted"}`, shaped(t, tagged{Name: "a", Hook: func() {}, Kind: celebrity.EventPromoted}))
}

// TestCacheSectionGolden serves admin.Cache of a live Cache on a real server, with a manual
// promotion in its hot set, and compares the JSON with testdata/cache.golden. What changes
// from run to run (the prefix, the instance ID, the time of the promotion) is masked.
func TestCacheSectionGolden(t *testing.T) {
	control := celebritytest.Standalone(t)
	p := strings.NewReplacer("{", "", "}", "", ":", "-").Replace(celebritytest.NewPrefix(t)) + "cache:"
	cache, err := celebrity.New(control.Client(t), func(_ context.Context, key string) (celebrity.Versioned[[]byte], error) {
		return celebrity.Versioned[[]byte]{Value: []byte("v:" + key), Version: 1}, nil
	}, celebrity.Options[[]byte]{Prefix: p, InstanceID: "web-1", Fresh: time.Minute,
		Loop: celebrity.LoopOptions{ReportInterval: -1}, PubSub: l1cache.PubSubGlobal})
	require.NoError(t, err)
	defer cache.Close()
	require.NoError(t, cache.Ready(t.Context()))
	require.NoError(t, cache.Promote(t.Context(), "post:7"))
	for range 3 {
		_, err = cache.Get(t.Context(), "post:7")
		require.NoError(t, err)
	}
	_, err = cache.Get(t.Context(), "user:1")
	require.NoError(t, err)

	srv := httptest.NewServer(admin.Must(admin.Options{Sections: map[string]admin.Section{"cache": admin.Cache(cache)}}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/cache")
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, b.String())

	got := strings.ReplaceAll(b.String(), p, "PREFIX:")
	got = regexp.MustCompile(`"since": "[^"]+"`).ReplaceAllString(got, `"since": "TIME"`)
	golden(t, "cache.golden", got)
}
