#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, staticcheck and the race-enabled tests
# of every module in the repository, against real redis-server processes that the tests
# start themselves. Installs redis-server (Debian/Ubuntu) when it is missing and this shell
# may install packages. REDIS_SERVER names another server binary (scripts/servers.sh installs
# the other versions CI runs, and scripts/matrix.sh runs the tests against them).
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2

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
# run fails at the end if any step did.
failed=()
step() {
  local what=$1
  shift
  if ! "$@"; then
    failed+=("$what")
  fi
}
# The other modules build in the workspace (go.work), against this tree's library. The
# library's own module is checked alone (GOWORK=off), with the dependency versions its go.mod
# names and its users get: in the workspace they would be raised to the highest any module
# requires (go-redis v9.23 for the benchmarks).
for m in $modules; do
  work=
  [ "$m" != . ] || work=off
  say "module $m: go vet"
  step "$m: go vet" bash -c "cd '$m' && GOWORK=$work go vet ./..."
  say "module $m: staticcheck $STATICCHECK_VERSION"
  step "$m: staticcheck" bash -c "cd '$m' && GOWORK=$work go run 'honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION' ./..."
  say "module $m: go test -race"
  step "$m: go test" bash -c "cd '$m' && GOWORK=$work go test -race -count=1 -timeout 20m ./..."
done

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
