package migrate

import "context"

// Item is a copied item, for tests.
type Item struct {
	Record bool   // Record is true for a record, false for an op record.
	Field  string // Field is the record field or op ID.
	Value  string // Value is the encoded value.
	Exp    int64  // Exp is the expiry, unix ms.
}

// SetBeforeApply installs a hook run before every batch is applied to a target. The hook
// gets a function that applies extra items to the same target for the same migration.
func SetBeforeApply(c *Coordinator, f func(ctx context.Context, id string, items []Item, apply func([]Item) error)) {
	c.beforeApply = func(ctx context.Context, r *run, items []item) {
		out := make([]Item, len(items))
		for i, it := range items {
			out[i] = Item{Record: it.kind == 'r', Field: it.field, Value: it.value, Exp: it.exp}
		}
		f(ctx, r.ID, out, func(extra []Item) error {
			in := make([]item, len(extra))
			for i, it := range extra {
				in[i] = item{kind: 'o', field: it.Field, value: it.Value, exp: it.Exp}
				if it.Record {
					in[i].kind = 'r'
				}
			}
			hook := c.beforeApply
			c.beforeApply = nil
			defer func() { c.beforeApply = hook }()
			_, _, err := c.apply(ctx, r, in)
			return err
		})
	}
}

// ScriptHashes returns the SHA1 of each migrate script by name, for fault matching.
func ScriptHashes() map[string]string {
	return map[string]string{
		"prepare": prepareScript.Hash(), "apply": applyScript.Hash(), "probe": probeScript.Hash(),
		"create": createScript.Hash(), "step": stepScript.Hash(), "cleanup": cleanupScript.Hash(),
		"acquire": acquireScript.Hash(), "renew": renewScript.Hash(), "carve": carveScript.Hash(),
		"fold": foldScript.Hash(), "holders": holdersScript.Hash(),
	}
}

// RenewSource is the lease-renewal script's text (what EVAL carries when EVALSHA misses).
var RenewSource = renewLua

// CleanupSource is the cleanup script's text, to load it on a shard.
var CleanupSource = cleanupLua
