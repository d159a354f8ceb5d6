package stripes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/celebrity-go/celebrity/internal/bound"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// genDoc is one generation in the layout document.
type genDoc struct {
	// Gen numbers generations from 1.
	Gen uint64 `json:"g"`
	// Stripes is the generation's stripe count.
	Stripes int `json:"n"`
	// Start is the proposed boundary (Unix ms) at which the previous generation stopped
	// taking new events; each stripe of the previous generation turned it into its own
	// end (close.lua). Zero for the first generation.
	Start int64 `json:"start"`
	// Tags are the hash tags of the stripes, chosen once when the generation was created.
	// None for a home generation.
	Tags []string `json:"tags"`
	// Home is set for generation 1 of a counter created as a home record (see homeLua):
	// its one stripe's fields live in the layout hash itself. A version without home
	// records finds no tag for the stripe and refuses the document.
	Home bool `json:"home,omitempty"`
	// Ends are the per-stripe boundaries, recorded once the next generation is open.
	Ends []int64 `json:"ends,omitempty"`
	// Pending is set while the generation is being opened: its stripes may not exist yet
	// and the previous generation is not closed yet.
	Pending bool `json:"pending,omitempty"`
}

// layoutDoc is the JSON document stored in field "doc" of the layout hash.
type layoutDoc struct {
	Gens []genDoc `json:"gens"`
	// Dedup is fixed when the layout is created. Nil in a layout written before it existed.
	Dedup *dedupDoc `json:"dedup,omitempty"`
	// Floor is set once generations were pruned: the latest boundary of a pruned
	// generation (Unix ms). Events routed by time before it, or stamped with a generation
	// older than the first one listed, belong to a sealed generation.
	Floor int64 `json:"floor,omitempty"`
	// Born is a random token chosen when the layout is created and copied into the birth
	// record; a layout with another token is another incarnation of the counter. Empty in a
	// layout written before it existed.
	Born string `json:"born,omitempty"`
}

// dedupDoc records the settings that decide where a dedup record lives and how long: the
// slice width names its set, the window sets its expiry, the bit width is the record. A
// process with other settings would not find the records of the others, so every process
// must use the recorded ones.
type dedupDoc struct {
	WindowMs int64 `json:"window_ms"`
	Slices   int   `json:"slices"`
	Bits     int   `json:"bits"`
}

// dedupDoc returns the dedup settings of c's options.
func (c *Counter) dedupDoc() *dedupDoc {
	return &dedupDoc{WindowMs: c.opts.DedupWindow.Milliseconds(), Slices: c.opts.DedupSlices, Bits: c.opts.DedupBits}
}

// checkDedup refuses options whose dedup settings differ from those recorded in d.
func (c *Counter) checkDedup(d *dedupDoc) error {
	if d == nil {
		return nil
	}
	o := c.dedupDoc()
	switch {
	case d.WindowMs != o.WindowMs:
		return invalidf("Options.DedupWindow must be %v, as recorded for counter %q, got %v", time.Duration(d.WindowMs)*time.Millisecond, c.opts.Name, c.opts.DedupWindow)
	case d.Slices != o.Slices:
		return invalidf("Options.DedupSlices must be %d, as recorded for counter %q, got %d", d.Slices, c.opts.Name, o.Slices)
	case d.Bits != o.Bits:
		return invalidf("Options.DedupBits must be %d, as recorded for counter %q, got %d", d.Bits, c.opts.Name, o.Bits)
	}
	return nil
}

// layout is one read of the layout hash: the document plus the fields fold.lua owns.
type layout struct {
	ver    uint64
	doc    layoutDoc
	base   int64
	folded map[uint64]int64
	// expiring holds, for each folded generation whose sealed stripes were given their TTL,
	// when that was done (Unix ms on the sealer's clock; 1 in layouts written before).
	expiring map[uint64]int64
	read     time.Time
}

// current returns the newest generation that is open (not pending).
func (l *layout) current() *genDoc {
	for i := len(l.doc.Gens) - 1; i >= 0; i-- {
		if !l.doc.Gens[i].Pending {
			return &l.doc.Gens[i]
		}
	}
	return nil
}

// gen returns generation g, or nil (also for a pruned one).
func (l *layout) gen(g uint64) *genDoc {
	if i := l.index(g); i >= 0 {
		return &l.doc.Gens[i]
	}
	return nil
}

// index returns the position of generation g in the document, or -1.
func (l *layout) index(g uint64) int {
	first := l.doc.Gens[0].Gen
	if g < first || g-first >= uint64(len(l.doc.Gens)) {
		return -1
	}
	return int(g - first)
}

// pruned reports whether generation g was sealed and dropped from the document.
func (l *layout) pruned(g uint64) bool {
	return g < l.doc.Gens[0].Gen
}

// isFolded reports whether generation g's total is in the base value.
func (l *layout) isFolded(g uint64) bool {
	_, ok := l.folded[g]
	return ok
}

// loadLayout reads the layout hash. It returns (nil, nil) if the record does not exist and
// never existed as far as this process and the birth record know; ErrVanished if it existed.
// A layout older than one this process has seen, or of another incarnation, is ErrVanished
// too.
func (c *Counter) loadLayout(ctx context.Context) (*layout, error) {
	// Only a version seen before this read was sent must be matched: a concurrent read may
	// see a newer one first.
	seen := c.maxVer.Load()
	m, err := bound.Do(ctx, func() (map[string]string, error) { return c.client.HGetAll(ctx, c.keys.layout()).Result() })
	if err != nil {
		return nil, fmt.Errorf("stripes: read layout: %w", noPermUnderDefault(err, c.opts.Prefix))
	}
	if len(m) == 0 {
		if m, err = c.checkUnborn(ctx, seen); len(m) == 0 || err != nil {
			return nil, err
		}
	}
	l, err := c.parseLayout(m)
	if err != nil {
		return nil, err
	}
	if err := c.checkIncarnation(ctx, l, seen); err != nil {
		return nil, err
	}
	if prev := c.layout.Load(); prev == nil || prev.ver <= l.ver {
		c.layout.Store(l)
	}
	return l, nil
}

// checkUnborn is called when the layout record was not found: it returns ErrVanished if
// this process had seen the layout when the read was sent (seen, its highest version), or
// if the birth record says it was created. The birth record is written only after the
// layout exists, so a birth record found after the layout was missed may belong to a
// creator that raced this read: the layout is read once more, and returned if it is there
// now.
func (c *Counter) checkUnborn(ctx context.Context, seen uint64) (map[string]string, error) {
	if seen > 0 {
		return nil, vanishedf("the layout record of counter %q (version %d) is gone", c.opts.Name, seen)
	}
	born, err := bound.Do(ctx, func() (string, error) { return c.client.HGet(ctx, c.keys.births(), c.opts.Name).Result() })
	switch {
	case err == redis.Nil:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("stripes: read birth record: %w", err)
	}
	m, err := bound.Do(ctx, func() (map[string]string, error) { return c.client.HGetAll(ctx, c.keys.layout()).Result() })
	switch {
	case err != nil:
		return nil, fmt.Errorf("stripes: read layout: %w", err)
	case len(m) > 0:
		return m, nil
	}
	return nil, vanishedf("the layout record of counter %q is gone, its birth record (%s) remains", c.opts.Name, born)
}

// checkIncarnation refuses a layout older than seen (the highest version this process had
// read when this read was sent) or belonging to another
// incarnation than the one this process has seen, and writes the birth record once per
// process (it is written after the layout is created, so a creator that crashed in between
// leaves it to the next process that reads the layout).
func (c *Counter) checkIncarnation(ctx context.Context, l *layout, seen uint64) error {
	if prev := c.layout.Load(); prev != nil {
		if prev.doc.Born != l.doc.Born {
			return vanishedf("the layout of counter %q was recreated (token %q, seen %q)", c.opts.Name, l.doc.Born, prev.doc.Born)
		}
		if l.ver < seen {
			return vanishedf("the layout of counter %q went back to version %d after version %d was seen", c.opts.Name, l.ver, seen)
		}
	}
	for v := c.maxVer.Load(); v < l.ver && !c.maxVer.CompareAndSwap(v, l.ver); v = c.maxVer.Load() {
	}
	if c.birthOK.Load() {
		return nil
	}
	token := l.doc.Born
	if token == "" {
		token = "-"
	}
	var got *redis.StringCmd
	_, err := bound.Pipelined(ctx, c.client, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, c.keys.births(), c.opts.Name, token)
		got = p.HGet(ctx, c.keys.births(), c.opts.Name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("stripes: write birth record: %w", err)
	}
	if got.Val() != token {
		return vanishedf("the layout of counter %q (token %q) is not the one its birth record names (%q)", c.opts.Name, token, got.Val())
	}
	c.birthOK.Store(true)
	return nil
}

// parseLayout decodes the fields of the layout hash.
func (c *Counter) parseLayout(m map[string]string) (*layout, error) {
	var err error
	l := &layout{folded: map[uint64]int64{}, expiring: map[uint64]int64{}, read: c.opts.Clock()}
	if m["ver"] == homeVer && !c.opts.previousFormat {
		if l.doc, err = parseHome(m); err != nil {
			return nil, err
		}
		l.ver = 1
		return l, c.checkDedup(l.doc.Dedup)
	}
	if l.ver, err = strconv.ParseUint(m["ver"], 10, 64); err != nil {
		return nil, fmt.Errorf("%w: layout version %q", ErrLayout, m["ver"])
	}
	if err := json.Unmarshal([]byte(m["doc"]), &l.doc); err != nil {
		return nil, fmt.Errorf("%w: layout document: %v", ErrLayout, err)
	}
	if b, ok := m["base"]; ok {
		if l.base, err = strconv.ParseInt(b, 10, 64); err != nil {
			return nil, fmt.Errorf("%w: layout base %q", ErrLayout, b)
		}
	}
	if err := l.parseGenFields(m); err != nil {
		return nil, err
	}
	if err := l.doc.check(!c.opts.previousFormat); err != nil {
		return nil, err
	}
	if err := c.checkDedup(l.doc.Dedup); err != nil {
		return nil, err
	}
	return l, nil
}

// parseGenFields decodes the per-generation fields of the layout hash: "expiring:<gen>"
// (a malformed one is skipped) and "folded:<gen>" (a malformed one is an ErrLayout).
func (l *layout) parseGenFields(m map[string]string) error {
	for k, v := range m {
		if gs, ok := strings.CutPrefix(k, "expiring:"); ok {
			g, err1 := strconv.ParseUint(gs, 10, 64)
			t, err2 := strconv.ParseInt(v, 10, 64)
			if err1 == nil && err2 == nil {
				l.expiring[g] = max(t, 1)
			}
			continue
		}
		gs, ok := strings.CutPrefix(k, "folded:")
		if !ok {
			continue
		}
		g, err1 := strconv.ParseUint(gs, 10, 64)
		t, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%w: layout field %s=%q", ErrLayout, k, v)
		}
		l.folded[g] = t
	}
	return nil
}

// check verifies the shape of a layout document read from Redis. A home generation is
// generation 1 of one stripe and no tag; home=false refuses it, as the version before home
// records did (Options.previousFormat).
func (d *layoutDoc) check(home bool) error {
	if len(d.Gens) == 0 {
		return fmt.Errorf("%w: layout has no generation", ErrLayout)
	}
	for i, g := range d.Gens {
		tags := len(g.Tags)
		if g.Home && home && g.Gen == 1 && g.Stripes == 1 && tags == 0 && i == 0 {
			tags = 1 // its key is the layout's
		}
		switch {
		case g.Home && home && tags != 1:
			return fmt.Errorf("%w: generation %d at position %d is not a home generation", ErrLayout, g.Gen, i)
		case g.Gen != d.Gens[0].Gen+uint64(i) || g.Gen == 0:
			return fmt.Errorf("%w: generation %d at position %d", ErrLayout, g.Gen, i)
		case g.Stripes < 1 || g.Stripes > MaxStripes || tags != g.Stripes:
			return fmt.Errorf("%w: generation %d has %d stripes and %d tags", ErrLayout, g.Gen, g.Stripes, len(g.Tags))
		case g.Ends != nil && len(g.Ends) != g.Stripes:
			return fmt.Errorf("%w: generation %d has %d ends", ErrLayout, g.Gen, len(g.Ends))
		case g.Pending && i != len(d.Gens)-1:
			return fmt.Errorf("%w: pending generation %d is not the newest", ErrLayout, g.Gen)
		}
	}
	if d.Gens[0].Pending {
		return fmt.Errorf("%w: first generation is pending", ErrLayout)
	}
	return nil
}

// homeVer is the "ver" field of a home record: a counter created with one stripe and never
// resized keeps that stripe in its layout hash, with no document (see homeLua). It reads
// as version 1 with one home generation; the first Resize writes the document beside the
// stripe's fields (cas.lua), version 2. A version before home records cannot parse it and
// refuses the counter, and its creation (cas.lua from version "0") fails on it.
const homeVer = "home"

// parseHome builds the document of the home record m: generation 1, one home stripe,
// the dedup settings (no field: the package's defaults) and birth token recorded by homeLua.
func parseHome(m map[string]string) (layoutDoc, error) {
	d := &dedupDoc{WindowMs: DefaultDedupWindow.Milliseconds(), Slices: DefaultDedupSlices, Bits: DefaultDedupBits}
	if s, ok := m["dedup"]; ok {
		if _, err := fmt.Sscanf(s, "%d:%d:%d", &d.WindowMs, &d.Slices, &d.Bits); err != nil {
			return layoutDoc{}, fmt.Errorf("%w: home record dedup settings %q", ErrLayout, s)
		}
	}
	if m["g"] != "1" {
		return layoutDoc{}, fmt.Errorf("%w: home record of generation %q", ErrLayout, m["g"])
	}
	return layoutDoc{Gens: []genDoc{{Gen: 1, Stripes: 1, Home: true}}, Dedup: d, Born: m["born"]}, nil
}

// createHome creates the home record of a counter with one stripe, unless the layout key
// exists (whatever it holds: another process created the counter first). Its birth token
// has 64 bits (a document's has 128): a cold counter pays for it twice, in the record and in
// the birth record.
func (c *Counter) createHome(ctx context.Context) error {
	d, dedup := c.dedupDoc(), ""
	if d.WindowMs != DefaultDedupWindow.Milliseconds() || d.Slices != DefaultDedupSlices || d.Bits != DefaultDedupBits {
		dedup = fmt.Sprintf("%d:%d:%d", d.WindowMs, d.Slices, d.Bits)
	}
	token := newToken()[:16]
	if err := homeScript.Run(ctx, c.client, []string{c.keys.layout()}, token, dedup).Err(); err != nil {
		return fmt.Errorf("stripes: create the home record: %w", err)
	}
	return nil
}

// casLayout stores doc if the layout is still at version ver. It reports false if another
// writer got there first.
func (c *Counter) casLayout(ctx context.Context, ver uint64, doc layoutDoc) (bool, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return false, fmt.Errorf("stripes: encode layout: %w", err)
	}
	nv, err := casScript.Run(ctx, c.client, []string{c.keys.layout()}, strconv.FormatUint(ver, 10), string(raw)).Int64()
	if err != nil {
		return false, fmt.Errorf("stripes: write layout: %w", err)
	}
	return nv != 0, nil
}

// ensureLayout returns a layout, creating the first generation (Options.Stripes stripes) if
// the record does not exist. Creation is idempotent: the stripes are created before the
// record names them, and only one creator's compare-and-set wins. Under DefaultPrefix,
// whether Options.Prefix names it or is empty, it first checks the previous default
// (ErrPreviousPrefix): a host that wrote Prefix: DefaultPrefix had its counters under
// PreviousDefaultPrefix before v0.2.0 as well.
func (c *Counter) ensureLayout(ctx context.Context) (*layout, error) {
	for i := range casAttempts {
		l, err := c.loadLayout(ctx)
		if err != nil || l != nil {
			return l, err
		}
		if i == 0 && c.opts.Prefix == DefaultPrefix {
			if err := checkPrevious(ctx, c.client, c.opts.Name); err != nil {
				return nil, err
			}
		}
		if c.opts.Stripes == 1 && !c.opts.previousFormat {
			if err := c.createHome(ctx); err != nil {
				return nil, err
			}
			continue
		}
		g := genDoc{Gen: 1, Stripes: c.opts.Stripes}
		if g.Tags, err = c.place(ctx, g.Gen, g.Stripes); err != nil {
			return nil, err
		}
		if err := c.createStripes(ctx, &g); err != nil {
			return nil, err
		}
		if _, err := c.casLayout(ctx, 0, layoutDoc{Gens: []genDoc{g}, Dedup: c.dedupDoc(), Born: newToken()}); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: creating the layout of %q", ErrConflict, c.opts.Name)
}

// cachedLayout returns the cached layout if it is younger than maxAge, else reads it
// (creating it if needed).
func (c *Counter) cachedLayout(ctx context.Context, maxAge time.Duration) (*layout, error) {
	if l := c.layout.Load(); l != nil && c.opts.Clock().Sub(l.read) < maxAge {
		return l, nil
	}
	return c.ensureLayout(ctx)
}

// casAttempts bounds compare-and-set loops on the layout record.
const casAttempts = 16

// newToken returns 16 random bytes in hex, from crypto/rand.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
