module github.com/celebrity-go/celebrity/examples

// go 1.26: contrib/prometheus (client_golang v1.25) declares go 1.26.
go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/celebrity-go/celebrity v0.2.0
	github.com/celebrity-go/celebrity/contrib/prometheus v0.2.0
	github.com/prometheus/client_golang v1.25.0
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/maypok86/otter/v2 v2.4.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
