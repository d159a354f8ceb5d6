package fleet

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
)

// TestReportRetryAddsSlowPairsOnce: a report whose reply is lost after the script ran is
// retried by go-redis; the retry is a "dup" and neither its regular nor its slow-lane pairs
// are added a second time.
func TestReportRetryAddsSlowPairsOnce(t *testing.T) {
	for _, name := range []string{"standalone", "cluster"} {
		t.Run(name, func(t *testing.T) {
			p := celebritytest.NewPrefix(t)
			inj := faults.New()
			var faulty, plain redis.UniversalClient
			if name == "cluster" {
				cl := celebritytest.SharedCluster(t)
				faulty = cl.Client(t, func(o *redis.ClusterOptions) { o.Dialer = inj.Dialer(nil) })
				plain = cl.Client(t)
			} else {
				srv := celebritytest.Standalone(t)
				faulty = srv.Client(t, func(o *redis.Options) { o.Dialer = inj.Dialer(nil) })
				plain = srv.Client(t)
			}
			sum := p + "{" + p + "sum0}:7"
			inj.DropReply(faults.Match{Command: "EVALSHA", Arg: "sum0"}, 1)
			res, err := reportScript.Run(t.Context(), faulty, []string{sum},
				"inst1", 10000, "25.000", p+"hot", "n7", 1, 1, 4, "warm", "30.000", "lukewarm", "1.500").Slice()
			require.NoError(t, err, "retried after the lost reply")
			require.Equal(t, int64(1), inj.Dropped())
			require.Equal(t, "dup", res[0], "the retry found the report already added")
			h, err := plain.HGetAll(t.Context(), sum).Result()
			require.NoError(t, err)
			require.Equal(t, map[string]string{"r:inst1": "1", "k:warm": "30", "s:lukewarm": "1.5", "n": "4"}, h)
		})
	}
}
