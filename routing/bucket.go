package routing

import "github.com/celebrity-go/celebrity/internal/hashing"

// BucketOf returns the bucket a tenant hashes to in a table of the given number of buckets:
// xxhash64 (seed 0) of the tenant's bytes, modulo buckets. It is the same function the
// Router uses, so tools and tests can find a tenant's bucket without a Router. buckets must
// be at least 1.
func BucketOf(tenant string, buckets uint32) uint32 {
	return uint32(hashing.Bucket(tenant, uint64(max(buckets, 1))))
}
