package celebrityprom

import (
	"strconv"

	"github.com/celebrity-go/celebrity/stripes"
)

// The mapping of every package's Stats. A field added to a Stats type is exported without
// a change here (see spec); an entry is needed only to make it an up-down counter or gauge,
// to give it a unit (OpenTelemetry only), or to name an array's index.
var (
	l1cacheComponent = component{pkg: "l1cache", typ: "l1cache.Stats", specs: map[string]spec{
		"Entries": {kind: upDown, unit: "{entry}"},
	}}
	invalidatorComponent = component{pkg: "l1cache.invalidator", typ: "l1cache.InvalidatorStats", specs: map[string]spec{
		"Published": {unit: "{message}"}, "PublishErrors": {unit: "{message}"}, "Received": {unit: "{message}"},
		"Ignored": {unit: "{message}"}, "Malformed": {unit: "{message}"},
	}}
	replicasComponent = component{pkg: "replicas", typ: "replicas.Stats", specs: map[string]spec{
		// One series per copy index: at most replicas.MaxCopies.
		"CopyReads": {unit: "{read}", label: "copy"}, "PrimaryReads": {unit: "{read}"},
	}}
	stripesComponent = component{pkg: "stripes", typ: "stripes.Stats", specs: map[string]spec{},
		// The newest generation's applied events per stripe: one series per stripe, at most
		// the counter's stripe count (stripes caps it at 4096).
		extra: func(s any) []sample {
			st := s.(stripes.Stats)
			if len(st.StripeWrites) == 0 {
				return nil
			}
			g := st.StripeWrites[len(st.StripeWrites)-1]
			out := []sample{{name: "generation", value: float64(g.Gen)}}
			for i, w := range g.Writes {
				out = append(out, sample{name: "stripe_writes", labelValue: strconv.Itoa(i), value: float64(w)})
			}
			return out
		},
		extraNames: []metricInfo{
			{name: "generation", field: "StripeWrites", kind: gauge, unit: "1"},
			{name: "stripe_writes", field: "StripeWrites", kind: gauge, unit: "{event}", label: "stripe"},
		},
	}
	stripesReaderComponent = component{pkg: "stripes.reader", typ: "stripes.ReaderStats", specs: map[string]spec{}}
	escrowComponent        = component{pkg: "escrow", typ: "escrow.Stats", specs: map[string]spec{}}
	routingComponent       = component{pkg: "routing", typ: "routing.Stats", specs: map[string]spec{
		"Generation": {kind: gauge, unit: "1"},
	}}
	migrateComponent = component{pkg: "migrate", typ: "migrate.Stats", specs: map[string]spec{
		"RecordsCopied": {unit: "{record}"}, "LogApplied": {unit: "{entry}"},
	}}
	hotkeysComponent = component{pkg: "hotkeys", typ: "hotkeys.Stats", specs: map[string]spec{
		"Tracked": {kind: upDown, unit: "{key}"}, "Hot": {kind: upDown, unit: "{key}"},
	}}
)
