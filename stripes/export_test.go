package stripes

import "time"

// withoutFold returns a copy of l that does not know generation g was folded, as a layout
// read before the fold would.
func (l *layout) withoutFold(g uint64) *layout {
	cp := *l
	cp.folded = map[uint64]int64{}
	for k, v := range l.folded {
		if k != g {
			cp.folded[k] = v
		}
	}
	cp.base -= l.folded[g]
	return &cp
}

// at returns ev with Time t.
func (ev Event) at(t time.Time) Event {
	ev.Time = t
	return ev
}

// withoutGensAfter returns a copy of l that knows only generations up to g, unfolded, as a
// layout read before they were opened would.
func (l *layout) withoutGensAfter(g uint64) *layout {
	cp := *l
	cp.doc.Gens = append([]genDoc(nil), l.doc.Gens[:g]...)
	cp.doc.Gens[g-1].Ends = nil
	cp.folded = map[uint64]int64{}
	cp.expiring = map[uint64]int64{}
	cp.base = 0
	return &cp
}
