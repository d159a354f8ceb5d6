package bound_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/stretchr/testify/require"
)

func TestCallReturnsTheResultOfAFastCall(t *testing.T) {
	v, err := bound.Call(t.Context(), func() (int, error) { return 7, nil }, nil)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	v, err = bound.Call(context.Background(), func() (int, error) { return 8, errors.New("x") }, nil)
	require.EqualError(t, err, "x")
	require.Equal(t, 8, v)
}

func TestCallLeavesAStuckCallWhenTheContextEnds(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	gotLate := make(chan int, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := bound.Call(ctx, func() (int, error) { close(started); <-release; return 9, nil },
			func(v int, err error) { gotLate <- v })
		done <- err
	}()
	<-started
	cancel() // no deadline: a cancel alone must end the wait
	require.ErrorIs(t, <-done, context.Canceled)
	close(release)
	require.Equal(t, 9, <-gotLate, "the abandoned call's result goes to late")
}

func TestCallOnADoneContextDoesNotRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), -time.Second)
	defer cancel()
	ran := false
	_, err := bound.Call(ctx, func() (int, error) { ran = true; return 0, nil }, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)
}
