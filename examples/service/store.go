package main

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/redis/go-redis/v9"
)

// Post is what the service serves: a post's body at a version of the store.
type Post struct {
	ID      string `json:"id"`
	Body    string `json:"body"`
	Version uint64 `json:"version"`
}

// store is the source of truth the cache reads through: one Redis hash per post
// (store:{post:ID} with fields v and body) on the same Redis, behind an artificial latency
// that stands for a database. It is the host's own data: the library never reads or writes
// these keys.
type store struct {
	rdb     redis.UniversalClient
	latency time.Duration
}

//go:embed store_put.lua
var storePutLua string

var storePut = redis.NewScript(storePutLua)

func storeKey(id string) string { return "store:{post:" + id + "}" }

// get reads post id, or celebrity.ErrNotFound. It returns by ctx's deadline whatever the
// client's options (see bounded).
func (s *store) get(ctx context.Context, id string) (Post, uint64, error) {
	if err := sleep(ctx, s.latency); err != nil {
		return Post{}, 0, err
	}
	var m map[string]string
	err := bounded(ctx, func(ctx context.Context) (err error) {
		m, err = s.rdb.HGetAll(ctx, storeKey(id)).Result()
		return err
	})
	if err != nil {
		return Post{}, 0, err
	}
	if len(m) == 0 {
		return Post{}, 0, celebrity.ErrNotFound
	}
	v, err := strconv.ParseUint(m["v"], 10, 64)
	if err != nil {
		return Post{}, 0, errors.New("store: bad version of post " + id)
	}
	return Post{ID: id, Body: m["body"], Version: v}, v, nil
}

// put writes a new body and returns the post at its new version.
func (s *store) put(ctx context.Context, id, body string) (Post, error) {
	if err := sleep(ctx, s.latency); err != nil {
		return Post{}, err
	}
	var v uint64
	err := bounded(ctx, func(ctx context.Context) (err error) {
		n, err := storePut.Run(ctx, s.rdb, []string{storeKey(id)}, body).Int64()
		v = uint64(n)
		return err
	})
	return Post{ID: id, Body: body, Version: v}, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bounded runs f and returns by ctx's deadline even when f does not: a stock go-redis client
// waits its ReadTimeout (3s) on a master that stopped answering, whatever the context says.
// f finishes in the background then.
func bounded(ctx context.Context, f func(ctx context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
