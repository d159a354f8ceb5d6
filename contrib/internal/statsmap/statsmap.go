// Package statsmap maps the Stats types of celebrity's packages to metrics, for the
// metrics adapters under contrib/ (OpenTelemetry and Prometheus), which share it: which
// fields are exported, under which name, as what kind of metric, with which unit and label.
//
// It lives in the library's module, although only the contrib modules import it, because it
// names the Stats types' fields: a Stats change and its mapping land in one version. A
// contrib module of one version may then build against a later version of the library, so
// this package's API only grows: what one release of the adapters calls stays.
package statsmap

import (
	"reflect"
	"strconv"
	"time"

	"github.com/celebrity-go/celebrity/internal/naming"
)

// Kind is how a Stats field is exported.
type Kind int

// The kinds of metric.
const (
	Counter Kind = iota // Counter is a monotonic count since the component started.
	UpDown              // UpDown is a current amount that goes up and down and adds across instances.
	Gauge               // Gauge is a current value that does not add across instances.
)

// Spec overrides what a field's Go type implies. A field without a Spec is exported under
// its snake_case name: an integer as a counter, a time.Duration as a gauge in seconds, a
// bool as a 0/1 gauge, an array as one series per index labelled "index", up to the last
// index with a non-zero value.
type Spec struct {
	Kind  Kind
	Unit  string
	Label string // Label is, for arrays, the attribute naming the index.
}

// Component maps one Stats type to metrics.
type Component struct {
	Pkg   string          // Pkg is the package, the second part of every name: "l1cache".
	Type  string          // Type is the Go type, named in descriptions: "l1cache.Stats".
	Specs map[string]Spec // Specs are by Go field name.
	// Extra adds samples a field's type cannot say (per-item slices); ExtraNames names them.
	Extra      func(stats any) []Sample
	ExtraNames []Metric
}

// Metric describes one instrument.
type Metric struct {
	Name    string // Name is snake_case, without the package: "stale_if_error_hits".
	Field   string // Field is the Go field name, for the description.
	Kind    Kind
	Unit    string
	Seconds bool   // Seconds tells that the value is a duration in seconds (float).
	Label   string // Label is the attribute of an array's index or an extra's item, "" for none.
}

// Sample is one value read from a Stats value.
type Sample struct {
	Name       string
	LabelValue string
	Value      float64
}

// Metrics lists the metrics of c, from the fields of a zero Stats value.
func (c Component) Metrics(zero any) []Metric {
	var out []Metric
	t := reflect.TypeOf(zero)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		sp, ok := c.Specs[f.Name]
		m := Metric{Name: snake(f.Name), Field: f.Name, Kind: Counter, Unit: "{event}"}
		ft := f.Type
		if ft.Kind() == reflect.Array {
			m.Label = "index"
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[time.Duration]():
			m.Kind, m.Unit, m.Seconds = Gauge, "s", true
		case ft.Kind() == reflect.Bool:
			m.Kind, m.Unit = Gauge, "1"
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
		default:
			continue // slices and structs: a component's Extra handles them
		}
		if ok {
			m.Kind = sp.Kind
			if sp.Unit != "" {
				m.Unit = sp.Unit
			}
			if sp.Label != "" {
				m.Label = sp.Label
			}
		}
		out = append(out, m)
	}
	return append(out, c.ExtraNames...)
}

// Samples reads every value of stats, in the order of Metrics.
func (c Component) Samples(stats any) []Sample {
	var out []Sample
	v := reflect.ValueOf(stats)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		name := snake(f.Name)
		if fv.Kind() == reflect.Array {
			// One series per index up to the last one with a non-zero value: none while
			// nothing was counted (a Cache's copies on a standalone server, where
			// replication is off), and at most as many as the indexes in use.
			n := fv.Len()
			for n > 0 && fv.Index(n-1).IsZero() {
				n--
			}
			for j := range n {
				if x, ok := number(fv.Index(j)); ok {
					out = append(out, Sample{Name: name, LabelValue: strconv.Itoa(j), Value: x})
				}
			}
			continue
		}
		if x, ok := number(fv); ok {
			out = append(out, Sample{Name: name, Value: x})
		}
	}
	if c.Extra != nil {
		out = append(out, c.Extra(stats)...)
	}
	return out
}

func number(v reflect.Value) (float64, bool) {
	if v.Type() == reflect.TypeFor[time.Duration]() {
		return time.Duration(v.Int()).Seconds(), true
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint()), true
	}
	return 0, false
}

// snake turns a Go field name into snake_case: "StaleIfErrorHits" -> "stale_if_error_hits".
func snake(s string) string { return naming.Snake(s) }
