package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownCluster is a Redis Cluster of three masters made of plain redis-server processes on
// free loopback ports, formed with CLUSTER ADDSLOTSRANGE and CLUSTER MEET, as
// scripts/examples.sh forms its cluster with redis-cli.
type ownCluster struct {
	dir   string
	procs []*exec.Cmd
	addrs []string
}

// startCluster starts three masters, each owning a third of the slots.
func startCluster(ctx context.Context, server string) (c *ownCluster, err error) {
	dir, err := os.MkdirTemp("", "celebrity-bench-")
	if err != nil {
		return nil, err
	}
	c = &ownCluster{dir: dir}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	for i := range 3 {
		port, err := freePort()
		if err != nil {
			return c, err
		}
		nd := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return c, err
		}
		cmd := exec.Command(server, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
			"--dir", nd, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(nd, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(nd, "nodes.conf"),
			"--cluster-node-timeout", "3000")
		if err := cmd.Start(); err != nil {
			return c, fmt.Errorf("starting %s: %w", server, err)
		}
		c.procs = append(c.procs, cmd)
		c.addrs = append(c.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	admins := make([]*redis.Client, len(c.addrs))
	for i, a := range c.addrs {
		admins[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		defer admins[i].Close()
	}
	wait := func(what string, ok func() bool) error {
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster: %s: timed out (logs in %s)", what, dir)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return nil
	}
	if err := wait("servers answering", func() bool {
		for _, a := range admins {
			if a.Ping(ctx).Err() != nil {
				return false
			}
		}
		return true
	}); err != nil {
		return c, err
	}
	const slots = 16384
	per := slots / len(admins)
	for i, a := range admins {
		lo, hi := i*per, (i+1)*per-1
		if i == len(admins)-1 {
			hi = slots - 1
		}
		if err := a.ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			return c, fmt.Errorf("cluster: ADDSLOTSRANGE: %w", err)
		}
	}
	for _, a := range admins[1:] {
		host, port, _ := net.SplitHostPort(c.addrs[0])
		if err := a.ClusterMeet(ctx, host, port).Err(); err != nil {
			return c, fmt.Errorf("cluster: MEET: %w", err)
		}
	}
	err = wait("cluster_state:ok with three masters on every node", func() bool {
		for _, a := range admins {
			info, err := a.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
		}
		return true
	})
	return c, err
}

// freePort returns a loopback port that is free, and whose cluster bus port (port+10000) is
// free too.
func freePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		_ = bus.Close()
		return port, nil
	}
	return 0, errors.New("cluster: no free port pair")
}

// stop kills the servers and removes their files.
func (c *ownCluster) stop() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	_ = os.RemoveAll(c.dir)
}
