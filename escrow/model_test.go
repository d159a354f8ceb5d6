package escrow

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/celebrity-go/celebrity/celebritytest"
	"github.com/celebrity-go/celebrity/celebritytest/faults"
	"github.com/celebrity-go/celebrity/internal/script"
	"github.com/celebrity-go/celebrity/internal/testkit"
)

// pending is the model of a transfer frozen at its source and not settled there.
type pending struct {
	from, to string
	k        int
	stage    string // frozen, accepted, refused
}

type heldJob struct {
	permit int
	token  int64
}

// escrowMachine runs random acquire / release / transfer steps, lost replies, crashes
// (a transfer stopped after any step, a process replaced) and Recover against a pool on a
// real server, and audits every permit after every step.
type escrowMachine struct {
	t       *rapid.T
	c       redis.UniversalClient
	faulty  redis.UniversalClient
	inj     *faults.Injector
	opts    PoolOptions
	p, fp   *Pool // fp runs through the injector without retries
	free    map[string]int
	jobs    map[string]heldJob
	done    map[string]bool // released, and not granted again since: a release replays as nil
	pend    map[string]*pending
	nextT   int
	drops   int64
	owners  []string
	jobIDs  []string
	tokens  map[int]int64 // highest token seen per permit
	ctxTest *testing.T
}

func (m *escrowMachine) newPools() {
	var err error
	m.p, err = NewPool(m.c, m.opts)
	if err != nil {
		m.t.Fatal(err)
	}
	if err := m.p.Init(testkit.Ctx(m.ctxTest)); err != nil {
		m.t.Fatal(err)
	}
	m.fp, err = NewPool(m.faulty, m.opts)
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *escrowMachine) drop(s *script.Script) {
	m.inj.DropReply(faults.Match{Command: "EVALSHA", Arg: s.Hash()}, 1)
	m.drops++
}

func (m *escrowMachine) checkDropped() {
	if got := m.inj.Dropped(); got != m.drops {
		m.t.Fatalf("dropped %d replies, armed %d", got, m.drops)
	}
}

func (m *escrowMachine) pick(stages ...string) (string, *pending) {
	var ids []string
	for id, p := range m.pend {
		if slices.Contains(stages, p.stage) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		m.t.Skip("no transfer in the wanted stage")
	}
	sort.Strings(ids)
	id := rapid.SampledFrom(ids).Draw(m.t, "transfer")
	return id, m.pend[id]
}

func (m *escrowMachine) pair() (string, string) {
	from := rapid.SampledFrom(m.owners).Draw(m.t, "from")
	to := rapid.SampledFrom(m.owners).Filter(func(s string) bool { return s != from }).Draw(m.t, "to")
	return from, to
}

// expectAcquire checks one acquire's result against the model and applies it.
func (m *escrowMachine) expectAcquire(owner, job string, g Grant, err error, replayExpected bool) {
	key := owner + "/" + job
	if h, ok := m.jobs[key]; ok {
		if err != nil || g.Permit != h.permit || g.Token != h.token || !g.Replayed {
			m.t.Fatalf("retry of %s: got %+v, %v; want permit %d token %d", key, g, err, h.permit, h.token)
		}
		return
	}
	if m.free[owner] == 0 {
		if !errors.Is(err, ErrExhausted) {
			m.t.Fatalf("acquire %s with nothing free: %+v, %v", key, g, err)
		}
		return
	}
	if err != nil || g.Replayed != replayExpected {
		m.t.Fatalf("acquire %s: %+v, %v (replay expected %v)", key, g, err, replayExpected)
	}
	if g.Token <= m.tokens[g.Permit] {
		m.t.Fatalf("permit %d token %d not above earlier %d", g.Permit, g.Token, m.tokens[g.Permit])
	}
	m.tokens[g.Permit] = g.Token
	m.free[owner]--
	m.jobs[key] = heldJob{g.Permit, g.Token}
	delete(m.done, key)
}

func (m *escrowMachine) actions() map[string]func(*rapid.T) {
	ctx := testkit.Ctx(m.ctxTest)
	return map[string]func(*rapid.T){
		"acquire": func(t *rapid.T) {
			owner, job := rapid.SampledFrom(m.owners).Draw(t, "owner"), rapid.SampledFrom(m.jobIDs).Draw(t, "job")
			g, err := m.p.Acquire(ctx, owner, job)
			m.expectAcquire(owner, job, g, err, false)
		},
		"acquireLostReply": func(t *rapid.T) {
			owner, job := rapid.SampledFrom(m.owners).Draw(t, "owner"), rapid.SampledFrom(m.jobIDs).Draw(t, "job")
			m.drop(acquireScript)
			if _, err := m.fp.Acquire(ctx, owner, job); err == nil {
				t.Fatal("a dropped reply must surface without retries")
			}
			m.checkDropped()
			g, err := m.p.Acquire(ctx, owner, job) // the caller retries with the same job ID
			m.expectAcquire(owner, job, g, err, true)
		},
		"release": func(t *rapid.T) {
			owner, job := rapid.SampledFrom(m.owners).Draw(t, "owner"), rapid.SampledFrom(m.jobIDs).Draw(t, "job")
			lost := rapid.Bool().Draw(t, "lostReply")
			if lost {
				m.drop(releaseScript)
				if err := m.fp.Release(ctx, owner, job); err == nil {
					t.Fatal("a dropped reply must surface without retries")
				}
				m.checkDropped()
			}
			_, held := m.jobs[owner+"/"+job]
			err := m.p.Release(ctx, owner, job)
			done := m.done[owner+"/"+job]
			switch {
			case !held && done && err != nil:
				t.Fatalf("replay of a release at %s: %v, want nil", owner, err)
			case !held && !done && !errors.Is(err, ErrNotHeld):
				t.Fatalf("release of a job that holds nothing at %s: %v, want ErrNotHeld", owner, err)
			case held && err != nil:
				t.Fatal(err) // also after a lost reply: the replay reports the release
			}
			if _, ok := m.jobs[owner+"/"+job]; ok {
				delete(m.jobs, owner+"/"+job)
				m.done[owner+"/"+job] = true
				m.free[owner]++
			}
		},
		"freeze": func(t *rapid.T) {
			from, to := m.pair()
			k := rapid.IntRange(1, 4).Draw(t, "k")
			m.nextT++
			id := fmt.Sprint("T", m.nextT)
			var err error
			if rapid.Bool().Draw(t, "lostReply") {
				m.drop(freezeScript)
				_, err = m.fp.Freeze(ctx, from, to, k, id)
				m.checkDropped()
				if err == nil {
					t.Fatal("a dropped reply must surface without retries")
				}
				if m.free[from] < k {
					_, err = m.p.Freeze(ctx, from, to, k, id)
				} else {
					err = nil
				}
			} else {
				_, err = m.p.Freeze(ctx, from, to, k, id)
			}
			if m.free[from] < k {
				if !errors.Is(err, ErrInsufficient) {
					t.Fatalf("freeze %d of %d free: %v", k, m.free[from], err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m.free[from] -= k
			m.pend[id] = &pending{from: from, to: to, k: k, stage: "frozen"}
		},
		"deliver": func(t *rapid.T) {
			id, tr := m.pick("frozen", "accepted", "refused")
			f := m.frozen(id)
			if tr.stage == "frozen" && rapid.Bool().Draw(t, "lostReply") {
				m.drop(acceptScript)
				if err := m.fp.Deliver(ctx, f); err == nil {
					t.Fatal("a dropped reply must surface without retries")
				}
				m.checkDropped()
			} else {
				err := m.p.Deliver(ctx, f)
				if tr.stage == "refused" {
					if !errors.Is(err, ErrRefused) {
						t.Fatalf("late delivery after refusal: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if tr.stage == "frozen" {
				tr.stage = "accepted"
				m.free[tr.to] += tr.k
			}
		},
		"complete": func(t *rapid.T) {
			id, _ := m.pick("accepted")
			if err := m.p.Complete(ctx, m.pend[id].from, id); err != nil {
				t.Fatal(err)
			}
			delete(m.pend, id)
		},
		"cancel": func(t *rapid.T) {
			id, tr := m.pick("frozen", "accepted", "refused")
			err := m.p.Cancel(ctx, tr.from, id)
			if tr.stage == "accepted" {
				if !errors.Is(err, ErrConflict) {
					t.Fatalf("cancel of an accepted transfer: %v", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				m.free[tr.from] += tr.k
			}
			delete(m.pend, id)
		},
		"crashInsideCancel": func(t *rapid.T) {
			id, tr := m.pick("frozen")
			accepted, err := m.p.refuse(ctx, tr.from, tr.to, id)
			if err != nil || accepted {
				t.Fatalf("refuse: %v %v", accepted, err)
			}
			tr.stage = "refused"
		},
		"transfer": func(t *rapid.T) {
			from, to := m.pair()
			k := rapid.IntRange(1, 4).Draw(t, "k")
			m.nextT++
			err := m.p.Transfer(ctx, from, to, k, fmt.Sprint("T", m.nextT))
			if m.free[from] < k {
				if !errors.Is(err, ErrInsufficient) {
					t.Fatalf("transfer %d of %d free: %v", k, m.free[from], err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m.free[from] -= k
			m.free[to] += k
		},
		"restartProcess": func(t *rapid.T) { m.newPools() },
		"recover": func(t *rapid.T) {
			rep, err := m.p.Recover(ctx)
			if err != nil || len(rep.Pending) > 0 {
				t.Fatalf("recover: %v %v", rep.Pending, err)
			}
			var wantDone, wantAborted []string
			for id, tr := range m.pend {
				switch tr.stage {
				case "frozen":
					m.free[tr.to] += tr.k
					wantDone = append(wantDone, id)
				case "accepted":
					wantDone = append(wantDone, id)
				case "refused":
					m.free[tr.from] += tr.k
					wantAborted = append(wantAborted, id)
				}
			}
			m.pend = map[string]*pending{}
			sort.Strings(wantDone)
			sort.Strings(wantAborted)
			sort.Strings(rep.Completed)
			sort.Strings(rep.Aborted)
			if !slices.Equal(wantDone, rep.Completed) || !slices.Equal(wantAborted, rep.Aborted) {
				t.Fatalf("recover: completed %v aborted %v, want %v %v", rep.Completed, rep.Aborted, wantDone, wantAborted)
			}
		},
		"": func(t *rapid.T) { m.audit() },
	}
}

func (m *escrowMachine) frozen(id string) Frozen {
	snap, err := m.p.ledgers[m.pend[id].from].snapshot(testkit.Ctx(m.ctxTest), m.c)
	if err != nil {
		m.t.Fatal(err)
	}
	rec := snap.out[id]
	return Frozen{ID: id, From: m.pend[id].from, To: rec.To, Permits: rec.P, Seq: rec.Seq, State: rec.S}
}

// audit checks the invariants after every step: every permit in exactly one place, totals
// equal to capacity, held never above capacity, and the model's counts.
func (m *escrowMachine) audit() {
	rep, err := m.p.Audit(testkit.Ctx(m.ctxTest))
	if err != nil {
		m.t.Fatal(err)
	}
	if !rep.Clean() || rep.Held > rep.Capacity {
		m.t.Fatalf("audit: %s", rep)
	}
	inTransfer := 0
	for _, tr := range m.pend {
		if tr.stage != "accepted" {
			inTransfer += tr.k
		}
	}
	if rep.Held != len(m.jobs) || rep.InTransfer != inTransfer || len(rep.Pending) != len(m.pend) {
		m.t.Fatalf("audit %s; model held %d in-transfer %d pending %d", rep, len(m.jobs), inTransfer, len(m.pend))
	}
	for _, o := range rep.Owners {
		if o.Free != m.free[o.Owner] {
			m.t.Fatalf("owner %s: %d free, model %d (%s)", o.Owner, o.Free, m.free[o.Owner], rep)
		}
	}
}

func TestModelEveryPermitInExactlyOnePlace(t *testing.T) {
	celebritytest.Long(t)
	t.Parallel()
	c := celebritytest.Standalone(t).Client(t)
	inj := faults.New()
	faulty := celebritytest.Standalone(t).Client(t, func(o *redis.Options) { o.Dialer, o.MaxRetries = inj.Dialer(nil), -1 })
	preload(t, c)
	base := celebritytest.NewPrefix(t)
	var runs atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		m := &escrowMachine{
			t: rt, c: c, faulty: faulty, inj: inj, ctxTest: t, drops: inj.Dropped(),
			opts: PoolOptions{Name: "m", Prefix: fmt.Sprint(base, runs.Add(1), ":"), Capacity: 10,
				Owners: []Owner{{"a", 1, 4}, {"b", 5, 7}, {"c", 8, 10}}, AllowWeakDurability: true, AllowSharedWitness: true},
			free:   map[string]int{"a": 4, "b": 3, "c": 3},
			jobs:   map[string]heldJob{},
			done:   map[string]bool{},
			pend:   map[string]*pending{},
			tokens: map[int]int64{},
			owners: []string{"a", "b", "c"},
			jobIDs: []string{"j1", "j2", "j3", "j4", "j5"},
		}
		m.newPools()
		rt.Repeat(m.actions())
	})
	require.Positive(t, runs.Load())
}
