#!/usr/bin/env bash
# The least-privilege leg of CI: the package tests of each package whose TestMain registers
# its ACL rule with the test kit, run once as a Redis user holding only that rule
# (CELEBRITYTEST_ACL, described in celebritytest's doc), so that a command or key outside
# the rule the package documents fails the suite. The suites run two at a time and without the race detector, which the
# suite's own run has already had.
#
#   scripts/acl.sh                # every package below
#   scripts/acl.sh escrow         # only these
#   CELEBRITY_FULL=1 scripts/acl.sh   # the long tests too
#
# The tests run with -short (the long fault, failover and load tests, which call
# celebritytest.Long, are skipped: the suite's own run has them, and their commands are the
# quick tests' commands) unless CELEBRITY_FULL=1.
#
# The root package is named celebrity here (its tests are ./).
#
# It prints one line per package and its time, the output of a failed one, and exits
# non-zero when one failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# PACKAGES are the packages that register their rule (celebritytest.RegisterRule in
# TestMain, under the package's name); add one here when it does.
PACKAGES=(escrow ratelimit replicas hotkeys stripes l1cache routing celebrity migrate)

# SKIP holds, per package, the tests left out of its run (go test -skip). migrate leaves out:
# - the tests of driver processes it builds, kills and stops (TestTwoDriverProcesses…,
#   TestCancelRacingADriverProcess…, TestZombieDriverProcess…, TestFoldBackDriverProcesses…,
#   TestCarveOutDriverProcesses…, TestSplitDriverProcesses…): the drivers connect as the default user, so the rule
#   checks nothing of theirs, and they take four minutes;
# - the tests whose own reads and writes go through the library's clients: the scripts
#   test's ZSCORE, the paused-cleanup test's SCRIPT LOAD, and the cache-mode tests, which
#   write the tenants' keys as the host (the Cache's rule with a tenant pattern is run by
#   examples/hosttest);
# - TestFoldBackSurvivesALostReplyOfEachScript, whose lossy clients are its own, as the
#   default user (a minute), and TestMoveBackAndForthUnderLoad, a load test (20 s to a
#   minute) of the commands TestMigrationUnderWritesKeepsEveryAcknowledgedWrite runs.
declare -A SKIP=(
  [migrate]='^(TestTwoDriverProcessesOfOneMigrationLeaveOneOpenOwner|TestCancelRacingADriverProcessLeavesNoClaim|TestZombieDriverProcessCannotRevertALaterMove|TestZombieDriverProcessCannotReclaimTheOldTarget|TestFoldBackDriverProcessesKilledOrStoppedAtEveryState|TestCarveOutDriverProcessesKilledOrStoppedAtEveryState|TestSplitDriverProcessesKilledOrStoppedAtEveryState|TestApplyIsOrderInsensitiveAndRefusesOlderVersions|TestPausedCleanupIsFencedByALaterEpoch|TestCacheMoveWarmFlipRollbackWithoutStampede|TestCacheRollbackSafeFollowsTheKeysThatMatter|TestFoldBackSurvivesALostReplyOfEachScript|TestMoveBackAndForthUnderLoad)$'
)

packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=("${PACKAGES[@]}")
export CI="${CI:-true}"
# Every package here is in the library's module, tested alone as in test.sh.
export GOWORK=off
short=-short
[ "${CELEBRITY_FULL:-0}" != 1 ] || short=
logs=$(mktemp -d "${TMPDIR:-/tmp}/celebrity-acl.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# Two suites at a time (LANES), as go test runs packages on a 2-core machine: more at once
# would test the machine's load more than the rules.
LANES=${ACL_LANES:-2}
start=$SECONDS
lane() { # lane I runs every LANES-th package from the I-th, one after another
  local i
  for ((i = $1; i < ${#packages[@]}; i += LANES)); do
    local p=${packages[$i]}
    local dirs=("./$p/")
    # The root package's lane also runs its loop's package, under the same rule.
    [ "$p" != celebrity ] || dirs=(./ ./internal/fleet/)
    if CELEBRITYTEST_ACL=$p go test $short -count=1 -timeout 20m -skip "${SKIP[$p]:-^$}" "${dirs[@]}" >"$logs/$p.log" 2>&1; then
      echo ok >"$logs/$p.rc"
    else
      echo FAIL >"$logs/$p.rc"
    fi
    echo $((SECONDS - start)) >"$logs/$p.time"
  done
}
lanes=()
for ((l = 0; l < LANES; l++)); do
  lane "$l" &
  lanes+=($!)
done
wait "${lanes[@]}"
failed=0
for p in "${packages[@]}"; do
  if [ "$(cat "$logs/$p.rc" 2>/dev/null)" = ok ]; then
    printf '%-12s ok   %4ds  %s\n' "$p" "$(cat "$logs/$p.time")" "$(tail -n 1 "$logs/$p.log")"
  else
    printf '%-12s FAIL %4ds\n' "$p" "$(cat "$logs/$p.time" 2>/dev/null || echo 0)"
    cat "$logs/$p.log" >&2
    failed=$((failed + 1))
  fi
done
if [ "$failed" -gt 0 ]; then
  echo "least privilege: $failed package(s) failed under their ACL rule" >&2
  exit 1
fi
