package routing

import "github.com/celebrity-go/celebrity/internal/routingfmt"

// Record is one versioned record as stored in a unit's Records hash, encoded as
// "<version>:l:<value>" (live) or "<version>:t:" (tombstone).
//
// Versions start at 1 and grow by one with every Put or Delete of the field, across
// deletes: a Put after a tombstone at version 5 writes version 6, so a late copy of an older
// version can always be recognised and refused.
type Record = routingfmt.Record
