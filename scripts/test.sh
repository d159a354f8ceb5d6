#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, staticcheck and the race-enabled tests
# of every module in the repository, against real redis-server processes that the tests
# start themselves. Installs redis-server (Debian/Ubuntu) when it is missing and this shell
# may install packages. REDIS_SERVER names another server binary (scripts/servers.sh installs
# the other versions CI runs, and scripts/matrix.sh runs the tests against them).
# The long tests that repeat a scenario (rounds, iterations, each fault state on a standalone
# server and a cluster) run a reduced share of it by default, every state and case still
# once; CELEBRITY_FULL=1 scripts/test.sh runs every long test at full iterations (see
# celebritytest.Full).
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
# TEST_PARALLEL is how many test binaries of the library's module run at once (go test -p;
# default: 3, one more than the 2 cores CI has). Most tests wait on servers and timers more
# than they compute: on 2 cores 4 at once took 7.7 minutes instead of 12.5, but a test that
# held a fleet to one source load under a 500 ms lease (now the default 2 s) lost it once to
# starvation at 4.
TEST_PARALLEL=${TEST_PARALLEL:-3}

say() { printf '\n== %s\n' "$*"; }

if ! command -v "${REDIS_SERVER:-redis-server}" >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing redis-server"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    # The package starts a system service; the tests start their own servers.
    (service redis-server stop || true) >/dev/null 2>&1
  else
    echo "redis-server is missing: install it (apt-get install redis-server) or set REDIS_SERVER" >&2
    exit 1
  fi
fi
say "$("${REDIS_SERVER:-redis-server}" --version)"

# Every server the suite starts keeps its files under this run's own temporary folder (the
# test kit and examples.sh both place them under TMPDIR), so the processes the suite started
# are those whose working folder or command line is inside it: servers that other programs
# on the machine run are none of the suite's business.
suite_tmp=$(mktemp -d "${TMPDIR:-/tmp}/celebrity-suite.XXXXXX")
export TMPDIR=$suite_tmp
trap 'rm -rf "$suite_tmp"' EXIT
suite_pids() {
  local p pid cwd
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" = $$ ] && continue
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    case "$cwd/" in
    "$suite_tmp"/*) echo "$pid" ;;
    *) tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$suite_tmp" && echo "$pid" ;;
    esac
  done
  return 0
}

modules=$(find . -name go.mod -not -path '*/testdata/*' -exec dirname {} \; | sort)

say "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

# Every module is checked even after one fails, so that one run reports every failure; the
# run fails at the end if any step did. Each step prints its time.
failed=()
step() {
  local what=$1 start=$SECONDS
  shift
  if ! "$@"; then
    failed+=("$what")
  fi
  echo "($what: $((SECONDS - start))s)"
}
# The library's own module is checked alone (GOWORK=off), with the dependency versions its
# go.mod names and its users get: in the workspace they would be raised to the highest any
# module requires (go-redis v9.23 for the benchmarks). The other modules are checked
# together in the workspace (go.work), against this tree's library: one go vet, one
# staticcheck and one go test over all of their packages, which run in parallel.
say "module .: go vet"
step ".: go vet" env GOWORK=off go vet ./...
say "module .: staticcheck $STATICCHECK_VERSION"
step ".: staticcheck" env GOWORK=off go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...
say "module .: go test -race"
step ".: go test" env GOWORK=off go test -race -count=1 -p "$TEST_PARALLEL" -timeout 20m ./...

others=()
for m in $modules; do
  [ "$m" = . ] || others+=("$m/...")
done
say "modules ${others[*]}: go vet"
step "other modules: go vet" go vet "${others[@]}"
say "modules ${others[*]}: staticcheck $STATICCHECK_VERSION"
step "other modules: staticcheck" go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" "${others[@]}"
say "modules ${others[*]}: go test -race"
step "other modules: go test" go test -race -count=1 -timeout 20m "${others[@]}"

# Each package that documents an ACL rule runs its tests once more as a user holding only it.
say "least privilege: package tests under each package's ACL rule"
step "least privilege" scripts/acl.sh

if [ -x scripts/examples.sh ]; then
  say "examples"
  step "examples" scripts/examples.sh
fi
# The modules as a user gets them once tagged: go install and go get at the candidate version
# from a module proxy on disk, outside the workspace.
say "release rehearsal"
step "release rehearsal" scripts/release.sh

left=$(suite_pids)
if [ -n "$left" ]; then
  echo "the suite left processes running:" >&2
  ps -o pid,ppid,etime,args -p "$(echo $left | tr ' ' ',')" >&2 || true
  exit 1
fi
if [ ${#failed[@]} -gt 0 ]; then
  say "failed:"
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
say "all passed"
