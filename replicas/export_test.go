package replicas

import (
	"context"
	"time"
)

// CopyKeys returns the physical keys of key's copies in r's current layout.
func (r *Replicator) CopyKeys(ctx context.Context, key string) ([]string, error) {
	lay, err := r.layoutFor(ctx, key)
	if err != nil {
		return nil, err
	}
	return append([]string(nil), lay.keys...), nil
}

// LeaseKey exposes the lease key of key.
func (r *Replicator) LeaseKey(key string) string { l, _ := r.leaseKeys(key); return l }

// PrimaryKey exposes the primary record's key of key.
func (r *Replicator) PrimaryKey(key string) string { return r.primaryKey(key) }

// WriteCopiesOnly writes a record to key's copies only, as the copy phase of a write that
// reached the logical key long ago and was delayed in flight.
func (r *Replicator) WriteCopiesOnly(ctx context.Context, key string, value []byte, version uint64, tombstone bool) error {
	lay, err := r.layoutFor(ctx, key)
	if err != nil {
		return err
	}
	targets := make([]target, len(lay.keys))
	end := r.opts.Clock().Add(time.Minute).UnixMilli()
	for i, k := range lay.keys {
		targets[i] = target{index: i, key: k, expiry: end, until: end}
	}
	return r.writeCopies(ctx, key, record{version: version, tombstone: tombstone, data: string(value)}, targets, 0)
}

// Decode exposes the stored-value decoder: ok, version, tombstone, data.
func Decode(raw string) (bool, uint64, bool, string) {
	rec, ok := decode(raw)
	return ok, rec.version, rec.tombstone, rec.data
}

// PickKey returns the physical key a Get of key would read first, as Get chooses it (the
// same layout and the same pick), so tests can batch those reads in pipelines.
func (r *Replicator) PickKey(ctx context.Context, key string) (string, error) {
	if !r.IsHot(key) {
		return key, nil
	}
	lay, err := r.layoutFor(ctx, key)
	if err != nil {
		return "", err
	}
	return lay.keys[r.pick(lay)], nil
}

// RenewScript is the hash and the source of renew.lua, so a test can hold back a holder's
// renewals (a holder cut off from Redis or paused, that loses its lease).
var RenewScript = [2]string{renewScript.Hash(), renewScript.Source()}

// ReleaseScript is the hash and the source of release.lua, so a test can lose the reply of
// a holder's release.
var ReleaseScript = [2]string{releaseScript.Hash(), releaseScript.Source()}
