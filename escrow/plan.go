package escrow

import "sort"

// reconcilePlan is the JSON plan reconcile.lua applies.
type reconcilePlan struct {
	Drop    []int        `json:"drop"`
	Release []string     `json:"release"`
	Add     []planAdd    `json:"add"`
	Refuse  []planRefuse `json:"refuse"`
	Trim    []planTrim   `json:"trim"`
}

type planAdd struct {
	T    string `json:"t"`
	From string `json:"from"`
	P    []int  `json:"p"`
}

type planRefuse struct {
	T    string `json:"t"`
	From string `json:"from"`
}

type planTrim struct {
	T string `json:"t"`
	P []int  `json:"p"`
}

// placement maps every permit found at an owner other than the one reconciled to where it
// was found: "T\x00source\x00id" for a permit frozen in a transfer its target has not
// accepted, a word naming the place otherwise.
type placement map[int][]string

// placeOthers records where every owner but owner holds each permit.
func placeOthers(owner string, byOwner map[string]ledgerSnapshot, order []string) placement {
	places := placement{}
	for _, name := range order {
		s := byOwner[name]
		if name == owner {
			continue
		}
		for _, n := range s.free {
			places[n] = append(places[n], "free")
		}
		for n := range s.held {
			places[n] = append(places[n], "held")
		}
		for id, rec := range s.out {
			if rec.S == "frozen" && byOwner[rec.To].in[inKey(name, id)].S != "accepted" {
				for _, n := range rec.P {
					places[n] = append(places[n], "T\x00"+name+"\x00"+id)
				}
			}
		}
	}
	return places
}

// elsewhere reports whether permit n is at another owner, in a place other than except.
func (pl placement) elsewhere(n int, except string) bool {
	for _, w := range pl[n] {
		if w != except {
			return true
		}
	}
	return false
}

// planReconcile computes what Reconcile changes at owner (pure: tested without Redis), and
// which of owner's outgoing transfers it cancels afterwards. confirmed is the sequence up to
// which owner's history is the one its witness confirmed.
func planReconcile(owner string, byOwner map[string]ledgerSnapshot, order []string, confirmed int64) (reconcilePlan, []string) {
	places := placeOthers(owner, byOwner, order)
	plan := reconcilePlan{Drop: []int{}, Release: []string{}, Add: []planAdd{}, Refuse: []planRefuse{}, Trim: []planTrim{}}
	mine := plan.dropStale(byOwner[owner], places, confirmed)
	plan.answerIncoming(owner, byOwner, order, places, mine)
	cancel := plan.trimOutgoing(owner, byOwner, places)
	return plan, cancel
}

// dropStale plans to drop owner's free and held permits that another owner has, and to free
// the permits of jobs granted after the confirmed point. It returns every permit me holds.
func (plan *reconcilePlan) dropStale(me ledgerSnapshot, places placement, confirmed int64) map[int]bool {
	mine := map[int]bool{}
	for _, n := range me.free {
		mine[n] = true
		if places.elsewhere(n, "") {
			plan.Drop = append(plan.Drop, n)
		}
	}
	for n, job := range me.held {
		mine[n] = true
		if places.elsewhere(n, "") {
			plan.Drop = append(plan.Drop, n)
		} else if tok := jobToken(me.jobs[job]); tok > confirmed {
			plan.Release = append(plan.Release, job)
		}
	}
	sort.Ints(plan.Drop)
	sort.Strings(plan.Release)
	return mine
}

// answerIncoming plans, for every transfer into owner that owner's ledger has no answer
// about, the answer its source acted on: refused when the source aborted it; accepted, with
// only the permits nobody else has (mine: the permits owner holds), when the source
// completed it or still has it frozen.
func (plan *reconcilePlan) answerIncoming(owner string, byOwner map[string]ledgerSnapshot, order []string, places placement, mine map[int]bool) {
	me := byOwner[owner]
	for _, name := range order {
		if name == owner {
			continue
		}
		s := byOwner[name]
		ids := make([]string, 0, len(s.out))
		for id := range s.out {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			rec := s.out[id]
			if _, ok := me.in[inKey(name, id)]; ok || rec.To != owner {
				continue
			}
			switch rec.S {
			case "aborted":
				plan.Refuse = append(plan.Refuse, planRefuse{T: id, From: name})
			case "done", "frozen":
				self := "T\x00" + name + "\x00" + id
				keep := []int{}
				for _, n := range rec.P {
					if !places.elsewhere(n, self) && !mine[n] {
						keep = append(keep, n)
					}
				}
				plan.Add = append(plan.Add, planAdd{T: id, From: name, P: keep})
			}
		}
	}
}

// trimOutgoing plans, for the outgoing transfers frozen in owner's (old) ledger whose target
// has not accepted them but whose permits are elsewhere now (the transfer was aborted and the
// permits moved on), to keep only the permits nobody else has, and returns them, sorted, to
// be cancelled afterwards, so that neither an abort nor a late delivery can bring the others
// back.
func (plan *reconcilePlan) trimOutgoing(owner string, byOwner map[string]ledgerSnapshot, places placement) []string {
	var cancel []string
	for id, rec := range byOwner[owner].out {
		if rec.S != "frozen" || byOwner[rec.To].in[inKey(owner, id)].S == "accepted" {
			continue
		}
		keep := []int{}
		for _, n := range rec.P {
			if !places.elsewhere(n, "") {
				keep = append(keep, n)
			}
		}
		if len(keep) < len(rec.P) {
			plan.Trim = append(plan.Trim, planTrim{T: id, P: keep})
			cancel = append(cancel, id)
		}
	}
	sort.Strings(cancel)
	return cancel
}
