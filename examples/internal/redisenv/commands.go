package redisenv

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// adminCommands are the commands CommandCounts leaves out of a real server's count: the
// clients' own housekeeping, not the example's data.
const adminCommands = " info ping cluster config client hello command script "

// CommandCounts returns, per address in Masters, the data commands the server executed so
// far: INFO commandstats less administrative commands on a real server, every command an
// embedded server received (miniredis keeps no per-command statistics). The difference of
// two calls is the load between them.
func (t *Target) CommandCounts(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	if t.Kind == Embedded {
		for _, m := range t.embedded[:len(t.Masters)] {
			out[m.Addr()] = uint64(m.CommandCount())
		}
		return out, nil
	}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		n := dataCommands(s)
		mu.Lock()
		out[c.Options().Addr] = n
		mu.Unlock()
		return nil
	}
	if c, ok := t.Client.(*redis.ClusterClient); ok {
		return out, c.ForEachMaster(ctx, read)
	}
	return out, read(ctx, t.Client.(*redis.Client))
}

// dataCommands sums the calls in an INFO commandstats reply, less adminCommands.
func dataCommands(info string) uint64 {
	var n uint64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		cmd, _, _ := strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || strings.Contains(adminCommands, " "+cmd+" ") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, _ := strconv.ParseUint(calls, 10, 64)
		n += v
	}
	return n
}
