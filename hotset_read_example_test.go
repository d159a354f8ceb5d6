package celebrity_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/celebrity-go/celebrity"
)

// ExampleReadHotSet prints the hot set a fleet of Caches publishes, from a process that has
// no Cache (an operator tool, a status page).
func ExampleReadHotSet() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}})
	defer rdb.Close()
	hs, err := celebrity.ReadHotSet(context.Background(), rdb, celebrity.DefaultPrefix)
	if err != nil {
		panic(err)
	}
	if hs.Empty() {
		fmt.Println("no fleet under", hs.Prefix)
		return
	}
	fmt.Printf("version %d, leader %q (epoch %d, lease %v left)\n", hs.Version, hs.Leader, hs.Epoch, hs.LeaseRemaining)
	for _, m := range hs.Members {
		fmt.Printf("%s manual=%v %.0f reads/s since %s\n", m.Key, m.Manual, m.Rate, m.Since.Format("15:04:05"))
	}
}
