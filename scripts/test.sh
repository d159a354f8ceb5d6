#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, staticcheck and the race-enabled tests
# of every module in the repository, against real redis-server processes that the tests
# start themselves. Installs redis-server (Debian/Ubuntu) when it is missing and this shell
# may install packages.
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

server_pids() { (pgrep -x redis-server || true) | sort; }
servers_before=$(server_pids)

modules=$(find . -name go.mod -not -path '*/testdata/*' -exec dirname {} \; | sort)

say "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

for m in $modules; do
  say "module $m: go vet"
  (cd "$m" && go vet ./...)
  say "module $m: staticcheck $STATICCHECK_VERSION"
  (cd "$m" && go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ./...)
  say "module $m: go test -race"
  (cd "$m" && go test -race -count=1 -timeout 20m ./...)
done

if [ -x scripts/examples.sh ]; then
  say "examples"
  scripts/examples.sh
fi
left=$(comm -13 <(echo "$servers_before") <(server_pids) | grep . || true)
if [ -n "$left" ]; then
  echo "the suite left redis-server processes running:" >&2
  ps -o pid,ppid,etime,args -p "$(echo $left | tr ' ' ',')" >&2 || true
  exit 1
fi
say "all passed"
