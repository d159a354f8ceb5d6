package l1cache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/celebrity-go/celebrity/internal/testkit"
)

// modelLoad is a load the model knows of: blocked in the loader until released.
type modelLoad struct {
	key, token string
	release    chan struct{}
	waiters    []chan string // results of the Gets waiting for it
	superseded bool
}

// TestGenerationsAgainstAModel checks random interleavings of Get, Set, Invalidate and load
// completions against a model of the generation rule: a load installs its result only if no
// Set or Invalidate of its key happened since it started, and every Get that joined a load
// receives that load's result.
func TestGenerationsAgainstAModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		announced := make(chan *modelLoad, 1)
		n := 0
		c, err := New(func(ctx context.Context, key string) (string, error) {
			n++ // loads start one at a time: the model waits for each announcement
			l := &modelLoad{key: key, token: fmt.Sprint("load", n), release: make(chan struct{})}
			announced <- l
			<-l.release
			return l.token, nil
		}, Options[string]{MaxEntries: 100, Fresh: time.Hour, Clock: new(testkit.Clock).Now})
		if err != nil {
			rt.Fatal(err)
		}
		defer c.Close()

		model := map[string]string{}        // key -> value a fresh Get returns
		inflight := map[string]*modelLoad{} // installable load per key
		var pending []*modelLoad            // every load not yet released
		startGet := func(key string) chan string {
			ch := make(chan string, 1)
			go func() {
				v, err := c.Get(context.Background(), key)
				if err != nil {
					v = err.Error()
				}
				ch <- v
			}()
			return ch
		}
		supersede := func(key string) {
			if l := inflight[key]; l != nil {
				l.superseded = true
				delete(inflight, key)
			}
		}
		check := func(ch chan string, want string) {
			select {
			case got := <-ch:
				if got != want {
					rt.Fatalf("Get returned %q, want %q", got, want)
				}
			case <-time.After(30 * time.Second):
				rt.Fatalf("Get did not return; want %q", want)
			}
		}

		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			key := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, fmt.Sprint("key", step))
			switch rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("op", step)) {
			case 0: // Get
				if v, ok := model[key]; ok {
					check(startGet(key), v)
				} else if l := inflight[key]; l != nil {
					before := c.Stats().Coalesced
					l.waiters = append(l.waiters, startGet(key))
					deadline := time.Now().Add(5 * time.Second)
					for c.Stats().Coalesced == before {
						if time.Now().After(deadline) {
							rt.Fatal("Get did not join the load in flight")
						}
						time.Sleep(50 * time.Microsecond)
					}
				} else {
					ch := startGet(key)
					select {
					case l := <-announced:
						l.waiters = append(l.waiters, ch)
						inflight[key] = l
						pending = append(pending, l)
					case <-time.After(30 * time.Second):
						rt.Fatal("no load started for a miss")
					}
				}
			case 1: // Set
				v := fmt.Sprint("set", step)
				c.Set(key, v)
				model[key] = v
				supersede(key)
			case 2: // Invalidate
				c.Invalidate(key)
				delete(model, key)
				supersede(key)
			case 3: // finish one pending load
				if len(pending) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(pending)-1).Draw(rt, fmt.Sprint("load", step))
				l := pending[i]
				pending = append(pending[:i], pending[i+1:]...)
				close(l.release)
				for _, w := range l.waiters {
					check(w, l.token)
				}
				if !l.superseded {
					model[l.key] = l.token
					delete(inflight, l.key)
				}
			}
		}
		for _, l := range pending {
			close(l.release)
			for _, w := range l.waiters {
				check(w, l.token)
			}
			if !l.superseded {
				model[l.key] = l.token
			}
		}
		for _, key := range []string{"a", "b"} {
			e := c.peek(key)
			want, ok := model[key]
			switch {
			case !ok && e != nil:
				rt.Fatalf("%s: cache holds %q, model holds nothing", key, e.value)
			case ok && (e == nil || e.value != want):
				rt.Fatalf("%s: cache holds %v, model holds %q", key, e, want)
			}
		}
	})
}
