package admin

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/celebrity-go/celebrity/internal/naming"
)

// Shape returns v in the JSON shape the handler serves and the celebrity CLI prints with
// --json, so that one field reads the same in both:
//   - a struct field is keyed by its snake_case name ("LeaseRemaining" is "lease_remaining"),
//     or by its json tag's name; fields keep their order; json:"-" and omitempty are honoured;
//   - a time.Duration is its text ("2.109s"), a time.Time RFC 3339 in UTC (null if zero);
//   - an error is its text (null if nil);
//   - a named integer type with a String method (a state, a kind) is its text;
//   - a fixed-size array of numbers (a per-copy or per-stripe counter) is a list cut after
//     its last non-zero element, so unused slots print nothing;
//   - a nil slice or map is empty ([] or {}), not null;
//   - a type with its own MarshalJSON or MarshalText keeps it;
//   - functions and channels are left out (null in a list or map).
//
// Shape reads v only; it is safe for concurrent use if reading v is.
func Shape(v any) any {
	if v == nil {
		return nil
	}
	return shape(reflect.ValueOf(v))
}

var (
	durationType      = reflect.TypeFor[time.Duration]()
	timeType          = reflect.TypeFor[time.Time]()
	errorType         = reflect.TypeFor[error]()
	stringerType      = reflect.TypeFor[fmt.Stringer]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func shape(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	switch {
	case (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil():
		return nil
	case t.Implements(errorType):
		return v.Interface().(error).Error()
	case t == durationType:
		return time.Duration(v.Int()).String()
	case t == timeType:
		if tm := v.Interface().(time.Time); !tm.IsZero() {
			return tm.UTC().Format(time.RFC3339Nano)
		}
		return nil
	case t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType):
		return v.Interface()
	case t.PkgPath() != "" && isInteger(t.Kind()) && t.Implements(stringerType):
		return v.Interface().(fmt.Stringer).String()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return shape(v.Elem())
	case reflect.Struct:
		o := &object{}
		o.addFields(v)
		return o
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[fmt.Sprint(it.Key().Interface())] = shape(it.Value())
		}
		return m
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return v.Interface() // []byte: base64, as encoding/json writes it
		}
		return list(v, v.Len())
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return nil
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil // JSON has no NaN or infinity
		}
	case reflect.Array:
		n := v.Len()
		if isNumber(t.Elem().Kind()) {
			for n > 0 && v.Index(n-1).IsZero() {
				n--
			}
		}
		return list(v, n)
	}
	return v.Interface()
}

func list(v reflect.Value, n int) []any {
	out := make([]any, n)
	for i := range n {
		out[i] = shape(v.Index(i))
	}
	return out
}

func isInteger(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Uintptr }

func isNumber(k reflect.Kind) bool {
	return isInteger(k) || k == reflect.Float32 || k == reflect.Float64
}

// object is a struct's fields in their declared order.
type object struct {
	keys []string
	vals []any
}

func (o *object) addFields(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		fv := v.Field(i)
		name, omitEmpty, skip := fieldName(f)
		switch {
		case skip:
		case f.Anonymous && name == "" && embeddedStruct(fv):
			if fv.Kind() == reflect.Pointer {
				fv = fv.Elem()
			}
			o.addFields(fv)
		case !f.IsExported():
		case fv.Kind() == reflect.Func || fv.Kind() == reflect.Chan:
		case omitEmpty && fv.IsZero():
		case omitEmpty && (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0:
		default:
			if name == "" {
				name = naming.Snake(f.Name)
			}
			o.keys = append(o.keys, name)
			o.vals = append(o.vals, shape(fv))
		}
	}
}

func embeddedStruct(v reflect.Value) bool {
	if v.Kind() == reflect.Pointer {
		return !v.IsNil() && v.Elem().Kind() == reflect.Struct && v.Type().Elem().Name() != ""
	}
	return v.Kind() == reflect.Struct
}

// fieldName reads a field's json tag: its name ("" for the default), omitempty, and "-".
func fieldName(f reflect.StructField) (name string, omitEmpty, skip bool) {
	tag, ok := f.Tag.Lookup("json")
	if !ok {
		return "", false, false
	}
	if tag == "-" {
		return "", false, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	for _, o := range strings.Split(opts, ",") {
		omitEmpty = omitEmpty || o == "omitempty" || o == "omitzero"
	}
	return name, omitEmpty, false
}

// remove leaves out the fields of the given keys.
func (o *object) remove(keys ...string) {
	for _, k := range keys {
		for i := range o.keys {
			if o.keys[i] == k {
				o.keys = append(o.keys[:i], o.keys[i+1:]...)
				o.vals = append(o.vals[:i], o.vals[i+1:]...)
				break
			}
		}
	}
}

// MarshalJSON writes the fields in order.
func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
