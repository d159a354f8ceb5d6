package escrow

import (
	"context"
	"errors"
	"fmt"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/redis/go-redis/v9"
)

// PreviousDefaultPrefix is DefaultPrefix before v0.2.0. A limit created under it keeps its
// keys there: a host upgrading from an earlier version sets Prefix to it on every process
// (the CHANGELOG's migration note). Init under the new default refuses to create a limit
// whose ledgers or witnesses exist under this prefix (ErrPreviousPrefix): a new ledger would
// free every permit again while processes of the version before still grant from the old.
const PreviousDefaultPrefix = "escrow:"

// previous names the keys a limit would have under PreviousDefaultPrefix: its ledgers' meta
// hashes (on the ledger client) and its witnesses (on the witness client). It is empty for a
// limit under any other prefix than DefaultPrefix: the host chose where it lives. A Prefix
// set to DefaultPrefix counts as the default: code that names the constant had its limits
// under PreviousDefaultPrefix before v0.2.0, as the constant then was.
type previous struct {
	name      string
	ledgers   []string
	witnesses []string
}

// add records the previous keys of the ledger with hash tag tag and the witness key that
// witness derives from its meta key.
func (p *previous) add(tag string, witness func(meta string) string) {
	meta := newLedger(PreviousDefaultPrefix, tag, "", 1, 1, 1).meta()
	p.ledgers = append(p.ledgers, meta)
	p.witnesses = append(p.witnesses, witness(meta))
}

// check returns ErrPreviousPrefix if any of p's keys exists: one pipeline of EXISTS on each
// client, bounded by ctx.
func (p previous) check(ctx context.Context, c, w Client) error {
	for _, side := range []struct {
		client Client
		keys   []string
	}{{c, p.ledgers}, {w, p.witnesses}} {
		if len(side.keys) == 0 {
			continue
		}
		found, err := bound.Do(ctx, func() (bool, error) { return anyExists(ctx, side.client, side.keys) })
		if err != nil {
			return fmt.Errorf("escrow: look for the limit under the previous default prefix: %w", err)
		}
		if found {
			return fmt.Errorf("%w: limit %q has keys under %q; set Prefix to %q on every process to keep them",
				ErrPreviousPrefix, errs.Short(p.name), PreviousDefaultPrefix, PreviousDefaultPrefix)
		}
	}
	return nil
}

// explain adds to err, when it reports a missing ledger (ErrLedgerMissing) of a limit under
// DefaultPrefix, that the limit exists under PreviousDefaultPrefix, if it does: a process
// upgraded without the migration note's Prefix, which skipped Init, learns what to set
// rather than only that its ledger is missing. Other errors, and a limit found nowhere else,
// are returned as they are. It costs the EXISTS pipelines of check, on that error only.
func (p previous) explain(ctx context.Context, err error, c, w Client) error {
	if !errors.Is(err, ErrLedgerMissing) || len(p.ledgers) == 0 {
		return err
	}
	if found := p.check(ctx, c, w); errors.Is(found, ErrPreviousPrefix) {
		return fmt.Errorf("%w; %w", err, found)
	}
	return err
}

// anyExists reports whether any of keys exists, with one EXISTS per key (keys may lie in
// different slots) in one pipeline. A user whose ACL rule does not reach a key cannot look
// (NOPERM): its host chose the new prefix for it, and the key counts as absent.
func anyExists(ctx context.Context, c Client, keys []string) (bool, error) {
	pipe := c.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	for _, cmd := range cmds {
		switch err := cmd.Err(); {
		case errs.KeyRefused(err):
		case err != nil:
			return false, err
		case cmd.Val() > 0:
			return true, nil
		}
	}
	return false, nil
}

// noPermUnderDefault adds to err, a refusal (NOPERM) of a key under prefix, what an upgrade
// from a version before v0.2.0 changes, when prefix is DefaultPrefix: a user granted ACLRule
// then holds "~escrow:*", and a process that kept the default now reads keys outside it.
func noPermUnderDefault(err error, prefix string) error {
	if prefix != DefaultPrefix || !errs.NoPerm(err) {
		return err
	}
	return fmt.Errorf("%w (keys under %q, the default prefix since v0.2.0; a user granted ACLRule before has %q: set Prefix to PreviousDefaultPrefix for limits created then)",
		err, DefaultPrefix, PreviousDefaultPrefix)
}
