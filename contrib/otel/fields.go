package celebrityotel

import (
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// kind is how a Stats field is exported.
type kind int

const (
	counter kind = iota // a monotonic count since the component started
	upDown              // a current amount that goes up and down and adds across instances
	gauge               // a current value that does not add across instances
)

// spec overrides what a field's Go type implies. A field without a spec is exported under
// its snake_case name: an integer as a counter, a time.Duration as a gauge in seconds, a
// bool as a 0/1 gauge, an array as one series per index labelled "index".
type spec struct {
	kind  kind
	unit  string
	label string // for arrays: the attribute naming the index
}

// component maps one Stats type to instruments.
type component struct {
	pkg   string          // the package, the second part of every name: "l1cache"
	typ   string          // the Go type, named in descriptions: "l1cache.Stats"
	specs map[string]spec // by Go field name
	// extra adds samples a field's type cannot say (per-item slices), and names them.
	extra      func(stats any) []sample
	extraNames []metricInfo
}

// metricInfo describes one instrument.
type metricInfo struct {
	name    string // snake_case, without the package: "stale_if_error_hits"
	field   string // Go field name, for the description
	kind    kind
	unit    string
	seconds bool   // the value is a duration in seconds (float)
	label   string // the attribute of an array's index or an extra's item, "" for none
}

// sample is one value read from a Stats value.
type sample struct {
	name       string
	labelValue string
	value      float64
}

// infos lists the instruments of c, from the fields of a zero Stats value.
func (c component) infos(zero any) []metricInfo {
	var out []metricInfo
	t := reflect.TypeOf(zero)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		sp, ok := c.specs[f.Name]
		m := metricInfo{name: snake(f.Name), field: f.Name, kind: counter, unit: "{event}"}
		ft := f.Type
		if ft.Kind() == reflect.Array {
			m.label = "index"
			ft = ft.Elem()
		}
		switch {
		case ft == reflect.TypeFor[time.Duration]():
			m.kind, m.unit, m.seconds = gauge, "s", true
		case ft.Kind() == reflect.Bool:
			m.kind, m.unit = gauge, "1"
		case ft.Kind() >= reflect.Int && ft.Kind() <= reflect.Uint64:
		default:
			continue // slices and structs: a component's extra handles them
		}
		if ok {
			m.kind = sp.kind
			if sp.unit != "" {
				m.unit = sp.unit
			}
			if sp.label != "" {
				m.label = sp.label
			}
		}
		out = append(out, m)
	}
	return append(out, c.extraNames...)
}

// samples reads every value of stats, in the order of infos.
func (c component) samples(stats any) []sample {
	var out []sample
	v := reflect.ValueOf(stats)
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		name := snake(f.Name)
		if fv.Kind() == reflect.Array {
			for j := range fv.Len() {
				if x, ok := number(fv.Index(j)); ok {
					out = append(out, sample{name: name, labelValue: strconv.Itoa(j), value: x})
				}
			}
			continue
		}
		if x, ok := number(fv); ok {
			out = append(out, sample{name: name, value: x})
		}
	}
	if c.extra != nil {
		out = append(out, c.extra(stats)...)
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
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]))) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}
