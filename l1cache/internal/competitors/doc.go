// Package competitors benchmarks l1cache against other Go caches in front of Redis. It is a
// module of its own so that the library's go.mod never carries them:
//
//	cd l1cache/internal/competitors && go test -run '^$' -bench . -benchtime=5s
package competitors
