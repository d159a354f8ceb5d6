#!/usr/bin/env bash
# The least-privilege leg of CI: the package tests of each package whose TestMain registers
# its ACL rule with the test kit, run once as a Redis user holding only that rule
# (CELEBRITYTEST_ACL, described in celebritytest's doc), so that a command or key outside
# the rule the package documents fails the suite. The suites run at the same time (they
# mostly wait on Redis and on their own timers) and without the race detector, which the
# suite's own run has already had.
#
#   scripts/acl.sh                # every package below
#   scripts/acl.sh escrow         # only these
#
# It prints one line per package and its time, the output of a failed one, and exits
# non-zero when one failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# PACKAGES are the packages that register their rule (celebritytest.RegisterRule in
# TestMain, under the package's name); add one here when it does.
PACKAGES=(escrow ratelimit replicas hotkeys stripes)

packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=("${PACKAGES[@]}")
export CI="${CI:-true}"
logs=$(mktemp -d "${TMPDIR:-/tmp}/celebrity-acl.XXXXXX")
trap 'rm -rf "$logs"' EXIT

declare -A pids
start=$SECONDS
for p in "${packages[@]}"; do
  CELEBRITYTEST_ACL=$p go test -count=1 -timeout 20m "./$p/" >"$logs/$p.log" 2>&1 &
  pids[$p]=$!
done
failed=0
for p in "${packages[@]}"; do
  if wait "${pids[$p]}"; then
    printf '%-12s ok   %4ds  %s\n' "$p" $((SECONDS - start)) "$(tail -n 1 "$logs/$p.log")"
  else
    printf '%-12s FAIL %4ds\n' "$p" $((SECONDS - start))
    cat "$logs/$p.log" >&2
    failed=$((failed + 1))
  fi
done
if [ "$failed" -gt 0 ]; then
  echo "least privilege: $failed package(s) failed under their ACL rule" >&2
  exit 1
fi
