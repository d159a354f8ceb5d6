package main

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeSample is what one node executed so far, read with INFO.
type nodeSample struct {
	At            time.Time
	Master        bool
	Reads, Writes uint64 // data commands, by the command's kind
}

// admin commands are the ones no user traffic sends; they count neither as reads nor writes.
var adminCommands = map[string]bool{
	"info": true, "ping": true, "cluster": true, "config": true, "client": true, "hello": true,
	"command": true, "script": true, "role": true, "readonly": true, "select": true, "auth": true,
	"subscribe": true, "ssubscribe": true, "psubscribe": true, "unsubscribe": true,
	"sunsubscribe": true, "punsubscribe": true, "publish": true, "spublish": true,
	"replconf": true, "psync": true, "sync": true, "time": true, "failover": true, "debug": true,
}

// writeCommands are the data commands that write; scripts count as writes (the library's
// scripts that only read are sent as EVALSHA_RO).
var writeCommands = map[string]bool{
	"set": true, "setex": true, "psetex": true, "setnx": true, "getset": true, "getdel": true,
	"mset": true, "del": true, "unlink": true, "expire": true, "pexpire": true, "expireat": true,
	"pexpireat": true, "persist": true, "incr": true, "incrby": true, "decr": true, "decrby": true,
	"hset": true, "hsetnx": true, "hincrby": true, "hdel": true, "hmset": true, "zadd": true,
	"zincrby": true, "zrem": true, "zremrangebyscore": true, "sadd": true, "srem": true,
	"lpush": true, "rpush": true, "ltrim": true, "evalsha": true, "eval": true, "fcall": true,
}

// sampler reads INFO from every node of the cluster at a fixed pace, for the chart and the
// skew figures. A node counts for a sample only while it is a master (a replica executes
// the writes it replicates).
type sampler struct {
	mu    sync.Mutex
	nodes []string
	data  map[string][]nodeSample
}

func newSampler(nodes []string) *sampler {
	return &sampler{nodes: nodes, data: map[string][]nodeSample{}}
}

func (s *sampler) run(ctx context.Context, every time.Duration) {
	clients := make([]*redis.Client, len(s.nodes))
	for i, a := range s.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, every)
				defer cancel()
				if info, err := c.Info(rctx, "replication", "commandstats").Result(); err == nil {
					smp := parseInfo(info)
					s.mu.Lock()
					s.data[s.nodes[i]] = append(s.data[s.nodes[i]], smp)
					s.mu.Unlock()
				}
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func parseInfo(info string) nodeSample {
	smp := nodeSample{At: time.Now()}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "role:master" {
			smp.Master = true
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		cmd, _, _ := strings.Cut(strings.TrimPrefix(name, "cmdstat_"), "|")
		if adminCommands[cmd] {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, _ := strconv.ParseUint(calls, 10, 64)
		if writeCommands[cmd] {
			smp.Writes += n
		} else {
			smp.Reads += n
		}
	}
	return smp
}

// delta is what each node executed as a master between from and to: reads and writes per
// node, and the total.
func (s *sampler) delta(from, to time.Time) (reads, writes map[string]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reads, writes = map[string]uint64{}, map[string]uint64{}
	for node, ss := range s.data {
		for i := 1; i < len(ss); i++ {
			a, b := ss[i-1], ss[i]
			if b.At.Before(from) || a.At.After(to) || !a.Master || !b.Master || b.Reads < a.Reads || b.Writes < a.Writes {
				continue
			}
			reads[node] += b.Reads - a.Reads
			writes[node] += b.Writes - a.Writes
		}
	}
	return reads, writes
}

// skew is max/mean over the nodes present in m (the masters of the window).
func skew(m map[string]uint64) float64 {
	var sum, hi uint64
	for _, v := range m {
		sum += v
		hi = max(hi, v)
	}
	if sum == 0 || len(m) == 0 {
		return 0
	}
	return float64(hi) / (float64(sum) / float64(len(m)))
}
