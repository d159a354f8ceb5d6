#!/usr/bin/env bash
# The version matrix, as CI runs it after scripts/test.sh (which runs the whole suite, with
# the race detector, on the default server and the machine's Go): the library's package
# tests, each against a standalone server and a Redis Cluster of its own, on every other
# server of scripts/servers.sh, and the examples against the last of them; and go vet on
# every older Go release the module supports. The matrix is diagonal: each older Go release
# runs the package tests of one of those servers (the first older release with the last
# server, and so on), so every server and every Go release is tested without a leg per pair;
# a release left over runs them on the default server.
#
#   scripts/matrix.sh                      # every server other than the default
#   scripts/matrix.sh valkey-8.1           # only these servers
#   MATRIX_EXAMPLES=0 scripts/matrix.sh    # package tests only
#   MATRIX_EXAMPLES=all scripts/matrix.sh  # the examples against every server
#   CELEBRITY_FULL=1 scripts/matrix.sh     # the long tests too
#
# The examples run against the last server only (Valkey 8.1 by default, the other
# implementation): test.sh runs them against the default server, and they send no command the
# package tests do not. The package tests of a leg run MATRIX_PARALLEL (3) packages at once.
#
# The package tests run with -short: the long fault, failover and load tests (those that
# call celebritytest.Long, seconds each) are skipped here, since test.sh runs every one of
# them with the race detector on the default server; the commands they send are those of
# the quick tests, which run on every server. CELEBRITY_FULL=1 runs them on every server.
#
# It prints one line per leg and its time, and exits non-zero when a leg failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# GO_RELEASES are the Go releases the project supports: the two latest. The machine's go
# runs the newest; an older one runs as GOTOOLCHAIN=goX.Y.Z, which the go command downloads
# through the module proxy, and only when go.mod's go directive allows that release.
GO_RELEASES=(1.25 1.26)
GO_1_25_TOOLCHAIN=${GO_1_25_TOOLCHAIN:-go1.25.0}

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(redis-8.0 valkey-8.1)

say() { printf '\n== %s\n' "$*"; }
results=()
failed=0
leg() { # leg NAME COMMAND... runs one leg and records its verdict and time
  local name=$1 start=$SECONDS rc=0
  shift
  say "$name"
  "$@" || rc=$?
  local verdict=ok
  [ "$rc" = 0 ] || {
    verdict="FAIL (exit $rc)"
    failed=$((failed + 1))
  }
  results+=("$(printf '%-56s %-14s %4ds' "$name" "$verdict" $((SECONDS - start)))")
}

# As in test.sh, every server is started under this run's own temporary folder, and the
# processes left running at the end are those whose folder or command line is inside it.
matrix_tmp=$(mktemp -d "${TMPDIR:-/tmp}/celebrity-matrix.XXXXXX")
export TMPDIR=$matrix_tmp
trap 'rm -rf "$matrix_tmp"' EXIT
run_pids() {
  local p pid cwd
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" = $$ ] && continue
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    case "$cwd/" in
    "$matrix_tmp"/*) echo "$pid" ;;
    *) tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$matrix_tmp" && echo "$pid" ;;
    esac
  done
  return 0
}
export CI="${CI:-true}"
short=-short
[ "${CELEBRITY_FULL:-0}" != 1 ] || short=
parallel=${MATRIX_PARALLEL:-3}
# The library's legs run its module alone (GOWORK=off), as test.sh does: with the dependency
# versions its go.mod names, and on Go 1.25, which go.work (go 1.26) would refuse. The
# examples build in the workspace, against this tree's library.

say "installing servers: ${servers[*]}"
declare -A launcher
while read -r name path; do
  launcher[$name]=$path
done < <(scripts/servers.sh "${servers[@]}")

# The older Go releases the module supports: the machine's go is the newest, and a release
# older than go.mod's go directive refuses the module.
want=$(awk '$1 == "go" {print $2; exit}' go.mod | cut -d. -f1,2)
older=()
for r in "${GO_RELEASES[@]}"; do
  case $(go env GOVERSION) in
  go"$r" | go"$r".*) continue ;; # the machine's go: test.sh ran vet and the tests on it
  esac
  if [ "$(printf '%s\n%s\n' "$r" "$want" | sort -V | head -n 1)" != "$want" ]; then
    say "Go $r: not run: go.mod says go $want"
    results+=("$(printf '%-56s %-14s' "Go $r: vet, tests" "not run (go.mod: go $want)")")
    continue
  fi
  older+=("$r")
done
toolchain() { # toolchain RELEASE prints the GOTOOLCHAIN value that runs it
  case $1 in
  1.25) echo "$GO_1_25_TOOLCHAIN" ;;
  *) echo "go$1.0" ;;
  esac
}
for r in "${older[@]}"; do
  leg "Go $r ($(toolchain "$r")): go vet ./..." env GOWORK=off GOTOOLCHAIN="$(toolchain "$r")" go vet ./...
done

# Server i (counting from the last) runs its package tests on older release i, if any.
declare -A go_for
i=${#servers[@]}
for r in "${older[@]}"; do
  i=$((i - 1))
  [ "$i" -ge 0 ] || break
  go_for[${servers[$i]}]=$r
done

for s in "${servers[@]}"; do
  bin=${launcher[$s]:-}
  if [ -z "$bin" ]; then
    leg "$s: install" false
    continue
  fi
  printf '%s: %s\n' "$s" "$("$bin" --version)"
  r=${go_for[$s]:-}
  if [ -n "$r" ]; then
    tc=$(toolchain "$r")
    leg "$s, Go $r ($tc): go test $short ./... (package tests)" \
      env GOWORK=off REDIS_SERVER="$bin" GOTOOLCHAIN="$tc" go test $short -count=1 -p "$parallel" -timeout 20m ./...
  else
    leg "$s: go test $short ./... (package tests)" \
      env GOWORK=off REDIS_SERVER="$bin" go test $short -count=1 -p "$parallel" -timeout 20m ./...
  fi
  examples=${MATRIX_EXAMPLES:-last}
  if [ "$examples" = last ] && [ "$s" = "${servers[-1]}" ] || [ "$examples" = all ] || [ "$examples" = 1 ]; then
    examples=yes
  fi
  if [ "$examples" = yes ] && [ -x scripts/examples.sh ]; then
    leg "$s: examples (standalone, cluster)" \
      env REDIS_SERVER="$bin" EXAMPLES_MODES="standalone cluster" scripts/examples.sh
  fi
done

# Older releases left without a server run the tests on the default one.
for r in "${older[@]:${#servers[@]}}"; do
  tc=$(toolchain "$r")
  leg "Go $r ($tc): go test $short ./..." env GOWORK=off GOTOOLCHAIN="$tc" go test $short -count=1 -timeout 20m ./...
done

left=$(run_pids)
if [ -n "$left" ]; then
  echo "the matrix left processes running:" >&2
  ps -o pid,ppid,etime,args -p "$(echo $left | tr ' ' ',')" >&2 || true
  failed=$((failed + 1))
fi
say "matrix"
printf '%s\n' "${results[@]}"
if [ "$failed" -gt 0 ]; then
  echo "matrix: $failed leg(s) failed" >&2
  exit 1
fi
