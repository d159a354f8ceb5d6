package stripes

import (
	"context"
	"errors"
	"fmt"

	"github.com/celebrity-go/celebrity/internal/bound"
	"github.com/celebrity-go/celebrity/internal/errs"
	"github.com/redis/go-redis/v9"
)

// PreviousDefaultPrefix is DefaultPrefix before v0.2.0. A counter created under it keeps its
// keys there: a host upgrading from an earlier version sets Options.Prefix to it on every
// process (the CHANGELOG's migration note). A counter under the new default is not created
// while its layout exists under this prefix (ErrPreviousPrefix): it would start again from
// zero beside the old one, and count again the retries whose records it cannot see.
const PreviousDefaultPrefix = "stripes:"

// ErrPreviousPrefix reports a counter that this process would create under DefaultPrefix
// while its layout exists under PreviousDefaultPrefix.
var ErrPreviousPrefix = errors.New("stripes: the counter exists under the previous default prefix")

// checkPrevious returns ErrPreviousPrefix if counter name has a layout record under
// PreviousDefaultPrefix. Every layout record of every version has the field "ver". A user
// whose ACL rule does not reach the previous prefix cannot look (NOPERM): its host chose
// the new prefix for it, and the check passes.
func checkPrevious(ctx context.Context, client Client, name string) error {
	old := keys{prefix: PreviousDefaultPrefix, name: name}.layout()
	_, err := bound.Do(ctx, func() (string, error) { return client.HGet(ctx, old, "ver").Result() })
	switch {
	case errors.Is(err, redis.Nil) || errs.KeyRefused(err):
		return nil
	case err != nil:
		return fmt.Errorf("stripes: look for %q under the previous default prefix: %w", errs.Short(name), err)
	}
	return fmt.Errorf("%w: counter %q has its layout at %s; set Options.Prefix to %q on every process to keep it",
		ErrPreviousPrefix, errs.Short(name), errs.Short(old), PreviousDefaultPrefix)
}

// noPermUnderDefault adds to err, a refusal (NOPERM) of a key under prefix, what an upgrade
// from a version before v0.2.0 changes, when prefix is DefaultPrefix: a user granted ACLRule
// then holds "~stripes:*", and a process that kept the default now reads keys outside it.
func noPermUnderDefault(err error, prefix string) error {
	if prefix != DefaultPrefix || !errs.NoPerm(err) {
		return err
	}
	return fmt.Errorf("%w (keys under %q, the default prefix since v0.2.0; a user granted ACLRule before has %q: set Options.Prefix to PreviousDefaultPrefix for counters created then)",
		err, DefaultPrefix, PreviousDefaultPrefix)
}
