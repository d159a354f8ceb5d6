package hotkeys_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/celebrity-go/celebrity/hotkeys"
)

// TestEveryBadInputWrapsErrInvalid: a bad Options field and a bad argument at run time both
// wrap ErrInvalid.
func TestEveryBadInputWrapsErrInvalid(t *testing.T) {
	_, optErr := hotkeys.New(hotkeys.Options{SampleRate: 2})
	d, err := hotkeys.New(hotkeys.Options{EvalInterval: -1})
	require.NoError(t, err)
	defer d.Close()
	_, argErr := d.Top(0)
	_, nilErr := hotkeys.NewProbe(nil)
	for name, err := range map[string]error{"option": optErr, "argument": argErr, "nil client": nilErr} {
		require.Error(t, err, name)
		require.True(t, errors.Is(err, hotkeys.ErrInvalid), "%s: %v is not ErrInvalid", name, err)
		require.False(t, errors.Is(err, hotkeys.ErrUnsupported), name)
	}
}
