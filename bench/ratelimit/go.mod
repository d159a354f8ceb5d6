module github.com/celebrity-go/celebrity/bench/ratelimit

// go 1.26: a benchmark run on the newest Go and never imported; go-redis v9.23 declares go 1.26.
go 1.26.0

require (
	github.com/celebrity-go/celebrity v0.2.0
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/maypok86/otter/v2 v2.4.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
