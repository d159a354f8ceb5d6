package naming_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/internal/naming"
)

func TestSnakeKeepsInitialismsWhole(t *testing.T) {
	for in, want := range map[string]string{
		"Hits":                 "hits",
		"StaleIfErrorHits":     "stale_if_error_hits",
		"DuplicateInstanceIDs": "duplicate_instance_ids",
		"IDsSeen":              "ids_seen",
		"HTTPServer":           "http_server",
		"TTL":                  "ttl",
		"L1":                   "l1",
		"L1Hits":               "l1_hits",
		"PubSubLive":           "pub_sub_live",
		"CopyReads":            "copy_reads",
		"LastError":            "last_error",
		"Sums":                 "sums",
		"P99Latency":           "p99_latency",
	} {
		require.Equal(t, want, naming.Snake(in), in)
	}
}
