package stripes_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity/stripes"
)

// ReadLayout shows how a counter is spread, from a process that does not know the settings
// it was created with.
func ExampleReadLayout() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	defer rdb.Close()
	lo, err := stripes.ReadLayout(context.Background(), rdb, stripes.DefaultPrefix, "course:72:views")
	if err != nil {
		panic(err) // errors.Is(err, stripes.ErrNoCounter) for a counter never used
	}
	fmt.Println("base", lo.Base, "dedup window", lo.DedupWindow)
	for _, g := range lo.Generations {
		fmt.Println("generation", g.Gen, g.State, g.Stripes, "stripes, total", g.Total)
		for _, s := range g.Values {
			fmt.Println("  stripe", s.Index, s.Value, "sealed:", s.Sealed, "missing:", s.Missing)
		}
	}
}
