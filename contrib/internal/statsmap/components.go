package statsmap

import (
	"strconv"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/celebrity-go/celebrity/stripes"
)

// The mapping of every package's Stats. A field added to a Stats type is exported without
// a change here (see Spec); an entry is needed only to make it an up-down counter or gauge,
// to give it a unit (OpenTelemetry only), or to name an array's index.
var (
	L1Cache = Component{Pkg: "l1cache", Type: "l1cache.Stats", Specs: map[string]Spec{
		"Entries": {Kind: UpDown, Unit: "{entry}"},
	}}
	Invalidator = Component{Pkg: "l1cache.invalidator", Type: "l1cache.InvalidatorStats", Specs: map[string]Spec{
		"Published": {Unit: "{message}"}, "PublishErrors": {Unit: "{message}"}, "Received": {Unit: "{message}"},
		"Ignored": {Unit: "{message}"}, "Malformed": {Unit: "{message}"},
	}}
	Replicas = Component{Pkg: "replicas", Type: "replicas.Stats", Specs: map[string]Spec{
		// One series per copy index: at most replicas.MaxCopies.
		"CopyReads": {Unit: "{read}", Label: "copy"}, "PrimaryReads": {Unit: "{read}"},
	}}
	Stripes = Component{Pkg: "stripes", Type: "stripes.Stats", Specs: map[string]Spec{},
		// The newest generation's applied events per stripe: one series per stripe, at most
		// the counter's stripe count (stripes caps it at 4096).
		Extra: func(s any) []Sample {
			st := s.(stripes.Stats)
			if len(st.StripeWrites) == 0 {
				return nil
			}
			g := st.StripeWrites[len(st.StripeWrites)-1]
			out := []Sample{{Name: "generation", Value: float64(g.Gen)}}
			for i, w := range g.Writes {
				out = append(out, Sample{Name: "stripe_writes", LabelValue: strconv.Itoa(i), Value: float64(w)})
			}
			return out
		},
		ExtraNames: []Metric{
			{Name: "generation", Field: "StripeWrites", Kind: Gauge, Unit: "1"},
			{Name: "stripe_writes", Field: "StripeWrites", Kind: Gauge, Unit: "{event}", Label: "stripe"},
		},
	}
	StripesReader = Component{Pkg: "stripes.reader", Type: "stripes.ReaderStats", Specs: map[string]Spec{}}
	StripesFamily = Component{Pkg: "stripes.family", Type: "stripes.FamilyStats", Specs: map[string]Spec{
		"Names": {Kind: UpDown, Unit: "{name}"}, "Sums": {Unit: "{read}"}, "CachedSums": {Unit: "{read}"},
		"Dropped": {Unit: "{name}"}, "Promotions": {Unit: "{resize}"}, "Demotions": {Unit: "{resize}"},
		"Seals": {Unit: "{seal}"}, "RoundErrors": {Unit: "{round}"},
	}}
	Escrow  = Component{Pkg: "escrow", Type: "escrow.Stats", Specs: map[string]Spec{}}
	Routing = Component{Pkg: "routing", Type: "routing.Stats", Specs: map[string]Spec{
		"Generation": {Kind: Gauge, Unit: "1"},
	}}
	Migrate = Component{Pkg: "migrate", Type: "migrate.Stats", Specs: map[string]Spec{
		"RecordsCopied": {Unit: "{record}"}, "LogApplied": {Unit: "{entry}"},
	}}
	Hotkeys = Component{Pkg: "hotkeys", Type: "hotkeys.Stats", Specs: map[string]Spec{
		"Tracked": {Kind: UpDown, Unit: "{key}"}, "Hot": {Kind: UpDown, Unit: "{key}"},
	}}
	Ratelimit = Component{Pkg: "ratelimit", Type: "ratelimit.Stats", Specs: map[string]Spec{
		"Allowed": {Unit: "{request}"}, "Denied": {Unit: "{request}"}, "Errors": {Unit: "{request}"},
		"Calls": {Unit: "{call}"}, "Chunks": {Unit: "{chunk}"}, "Cells": {Unit: "{cell}"}, "Syncs": {Unit: "{sync}"},
		"SyncErrors": {Unit: "{sync}"},
		"Keys":       {Kind: UpDown, Unit: "{key}"},
		"Leasing":    {Kind: UpDown, Unit: "{key}"}, "HotSwitches": {Unit: "{switch}"}, "ColdSwitches": {Unit: "{switch}"},
	}}
)

// cachePart is one part of a celebrity.Cache whose Stats are nested in the Cache's.
type cachePart struct {
	field, prefix string
	c             Component
	zero          any
	get           func(celebrity.Stats) any
}

// Cache maps celebrity.Stats: the Cache's own fields, and its parts' Stats (L1, Replicas,
// Invalidator) by their components, each name prefixed with the part's ("l1_hits",
// "replicas_copy_reads", "invalidator_published").
var Cache = func() Component {
	parts := []cachePart{
		{"L1", "l1_", L1Cache, l1cache.Stats{}, func(s celebrity.Stats) any { return s.L1 }},
		{"Replicas", "replicas_", Replicas, replicas.Stats{}, func(s celebrity.Stats) any { return s.Replicas }},
		{"Invalidator", "invalidator_", Invalidator, l1cache.InvalidatorStats{}, func(s celebrity.Stats) any { return s.Invalidator }},
	}
	c := Component{Pkg: "cache", Type: "celebrity.Stats", Specs: map[string]Spec{
		"SourceLoads": {Unit: "{load}"}, "Hot": {Kind: UpDown, Unit: "{key}"}, "HotVersion": {Kind: Gauge, Unit: "1"},
		"LoopCommands": {Unit: "{command}"},
	}}
	for _, p := range parts {
		for _, m := range p.c.Metrics(p.zero) {
			m.Name, m.Field = p.prefix+m.Name, p.field+"."+m.Field
			c.ExtraNames = append(c.ExtraNames, m)
		}
	}
	c.Extra = func(s any) []Sample {
		st := s.(celebrity.Stats)
		var out []Sample
		for _, p := range parts {
			for _, x := range p.c.Samples(p.get(st)) {
				x.Name = p.prefix + x.Name
				out = append(out, x)
			}
		}
		return out
	}
	return c
}()
