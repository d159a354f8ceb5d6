// Package hashing holds the project's stable hash contract.
//
// Every identifier that crosses a process boundary (an event ID choosing a stripe, a tenant
// choosing a bucket, a logical key choosing its copies) is hashed with xxhash64, seed 0, over
// its UTF-8 bytes, and a bucket is the hash modulo the bucket count. The vectors in
// testdata/hash_vectors.json pin the contract: a change that breaks them moves data.
// Go's map hash and hash/maphash are seeded per process and must never be used for this.
package hashing

import "github.com/cespare/xxhash/v2"

// Sum64 returns xxhash64 (seed 0) of the UTF-8 bytes of id.
func Sum64(id string) uint64 {
	return xxhash.Sum64String(id)
}

// Bucket returns Sum64(id) % n. It panics if n is 0, as integer division does; callers
// validate their bucket counts at construction.
func Bucket(id string, n uint64) uint64 {
	return Sum64(id) % n
}
