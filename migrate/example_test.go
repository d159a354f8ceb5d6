package migrate_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/routing"
)

// A hot course's bucket moves from shard "a" to shard "b"; the control Redis holds the
// route table and the journal.
func ExampleCoordinator_Migrate() {
	ctx := context.Background()
	control := redis.NewClient(&redis.Options{Addr: "control:6379"})
	co, err := migrate.New(control, migrate.Options{Shards: map[string]migrate.ShardClient{
		"a": redis.NewClient(&redis.Options{Addr: "shard-a:6379"}),
		"b": redis.NewClient(&redis.Options{Addr: "shard-b:6379"}),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := co.Migrate(ctx, migrate.Spec{ID: "move-course-72", Unit: routing.BucketUnit(72), Target: "b"})
	switch {
	case err == nil:
		fmt.Println(st) // OwnedB at the new generation, with the write pause.
	case errors.Is(err, migrate.ErrAborted):
		fmt.Println("aborted, the source still owns the bucket:", st.Reason)
	default:
		// The driver stopped (process shutdown, network): any coordinator continues it.
		st, err = co.Resume(ctx, "move-course-72")
		fmt.Println(st, err)
	}
}

// A pure cache's hot tenant moves with its hottest keys warmed first; rollback is a flip
// back while the old copy lives.
func ExampleCache_Move() {
	ctx := context.Background()
	control := redis.NewClient(&redis.Options{Addr: "control:6379"})
	mv, err := migrate.NewCache(control, migrate.CacheOptions{Shards: map[string]migrate.CacheClient{
		"a": redis.NewClient(&redis.Options{Addr: "shard-a:6379"}),
		"b": redis.NewClient(&redis.Options{Addr: "shard-b:6379"}),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := mv.Move(ctx, migrate.CacheSpec{Tenant: "acme", Target: "b", Keys: []string{"acme:home", "acme:menu"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if st.RollbackSafe {
		_, err = mv.Rollback(ctx, st.ID)
	}
	fmt.Println(err)
}
