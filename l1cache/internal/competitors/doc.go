// Package competitors benchmarks l1cache against other Go caches in front of Redis, in one
// run: go-redis's client-side cache (RESP3 tracking), rueidis's client-side cache
// (server-assisted, RESP3 tracking, with a client-side TTL), sturdyc (in-process, with
// early background refreshes) and go-redis/cache (a TinyLFU local cache over Redis). Two
// figures per cache: the cost of a hit of one hot key, and the Redis reads per instance
// per second when 100 simulated instances read that key as fast as they can. It is a module
// of its own so that the library's go.mod never carries them:
//
//	cd l1cache/internal/competitors && go test -run '^$' -bench . -benchtime=5s
package competitors
