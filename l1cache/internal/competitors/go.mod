module github.com/celebrity-go/celebrity/l1cache/internal/competitors

// go 1.26: benchmarks against other caches, run on the newest Go and never imported; go-redis v9.23 declares go 1.26.
go 1.26.0

require (
	github.com/celebrity-go/celebrity v0.2.0
	github.com/go-redis/cache/v9 v9.0.0
	github.com/maypok86/otter/v2 v2.4.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	github.com/viccon/sturdyc v1.1.5
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.13.6 // indirect
	github.com/vmihailenco/go-tinylfu v0.2.2 // indirect
	github.com/vmihailenco/msgpack/v5 v5.3.4 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
