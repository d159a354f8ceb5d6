package celebrity

import (
	"encoding/json"
	"fmt"
)

// Codec turns values into the bytes stored in Redis and back. Implementations must be safe
// for concurrent use. Encode runs on Set and on every source load; Decode on every
// Redis-level read (never on an L1 hit).
type Codec[V any] interface {
	Encode(v V) ([]byte, error)
	Decode(data []byte) (V, error)
}

// JSON is a Codec that stores values as encoding/json. It is the default for every V except
// []byte.
type JSON[V any] struct{}

// Encode marshals v.
func (JSON[V]) Encode(v V) ([]byte, error) { return json.Marshal(v) }

// Decode unmarshals data.
func (JSON[V]) Decode(data []byte) (V, error) {
	var v V
	err := json.Unmarshal(data, &v)
	return v, err
}

// Bytes is a Codec that stores a []byte as is. It is the default when V is []byte.
type Bytes struct{}

// Encode returns b itself.
func (Bytes) Encode(b []byte) ([]byte, error) { return b, nil }

// Decode returns data itself.
func (Bytes) Decode(data []byte) ([]byte, error) { return data, nil }

// defaultCodec returns Bytes when V is []byte and JSON otherwise.
func defaultCodec[V any]() Codec[V] {
	var zero V
	if _, ok := any(zero).([]byte); ok {
		return any(Codec[[]byte](Bytes{})).(Codec[V])
	}
	return JSON[V]{}
}

// encode runs the codec, turning a panic or an error into an error wrapping ErrCodec.
func encode[V any](c Codec[V], key string, v V) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: encoding %q panicked: %v", ErrCodec, key, p)
		}
	}()
	data, err = c.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %q: %w", ErrCodec, key, err)
	}
	return data, nil
}

// decode is encode's counterpart.
func decode[V any](c Codec[V], key string, data []byte) (v V, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: decoding %q panicked: %v", ErrCodec, key, p)
		}
	}()
	v, err = c.Decode(data)
	if err != nil {
		return v, fmt.Errorf("%w: decoding %q: %w", ErrCodec, key, err)
	}
	return v, nil
}
