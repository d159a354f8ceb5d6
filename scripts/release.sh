#!/usr/bin/env bash
# The release rehearsal: publishes the repository's modules at a candidate version to a
# module proxy on disk (scripts/release, from the working tree), then does what a user does
# once the version is tagged, in empty modules outside the repository and without go.work:
#
#   go install github.com/celebrity-go/celebrity/cmd/celebrity@VERSION, and runs it;
#   go get the library at VERSION into a module that declares go 1.25 (the README's promise),
#   checks that nothing raised that, and builds the README's snippets (the first and "A taste of each package");
#   go get contrib/otel and contrib/prometheus at VERSION and builds their doc examples.
#
# Our modules come only from the proxy on disk (GONOSUMDB: no checksum database knows them
# yet); third-party modules come from the local module cache, then proxy.golang.org. The
# empty modules start from the go.sum lines the repository's modules commit, so a
# third-party module already pinned there must match them; the checksum database is not
# asked (GOSUMDB=off), since the rehearsal tests our modules, not the network.
#
#   scripts/release.sh             # the candidate named by go.work's replace (v0.2.0)
#   scripts/release.sh v0.2.0      # another candidate: every module must require it
#
# It fails loudly: any step that fails stops the run with its output.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$SECONDS

version=${1:-$(awk '$1 == "replace" && $2 == "github.com/celebrity-go/celebrity" {print $3}' go.work)}
[ -n "$version" ] || {
  echo "release.sh: no candidate version (give one, or keep go.work's replace of the library)" >&2
  exit 1
}
say() { printf '\n== %s\n' "$*"; }
fail() {
  echo "release.sh: $*" >&2
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/celebrity-release.XXXXXX")
cleanup() {
  chmod -R u+w "$tmp" 2>/dev/null || true # the module cache is read-only
  rm -rf "$tmp"
}
trap cleanup EXIT

say "proxy on disk: our modules at $version"
(cd scripts/release && go run . -root "$repo" -version "$version" -out "$tmp/proxy")

# The user's environment: no workspace, a module cache of its own (a cached $version from an
# earlier rehearsal would hide this tree's), the machine's go.
cache=$(go env GOMODCACHE)
# -trimpath keeps the build cache's entries independent of where the module cache is.
export GOWORK=off GOFLAGS="-mod=mod -trimpath" GOTOOLCHAIN=local
export GOMODCACHE=$tmp/modcache GOBIN=$tmp/bin
export GOPROXY="file://$tmp/proxy,file://$cache/cache/download,https://proxy.golang.org"
export GONOSUMDB=github.com/celebrity-go GONOPROXY= GOPRIVATE= GOSUMDB=off

# newmod DIR GO makes an empty module declaring go GO, with the repository's go.sum lines.
newmod() {
  mkdir -p "$1"
  (cd "$1" && go mod init example.com/user >/dev/null 2>&1 && go mod edit -go="$2")
  cat go.sum cmd/celebrity/go.sum contrib/otel/go.sum contrib/prometheus/go.sum | sort -u >"$1/go.sum"
}

# readme_program prints the README's first snippet and its "A taste of each package" as a
# program: each paragraph of a snippet in a block of its own (they reuse names such as res),
# the variables it declares used, and the names it takes as given (rdb, db, loadUser, ...)
# declared first.
readme_program() {
  cat <<'GO'
// The README's first snippet and "A taste of each package", as a user copies them.
package main

import (
	"context"
	"log"
	"time"

	"github.com/celebrity-go/celebrity"
	"github.com/celebrity-go/celebrity/escrow"
	"github.com/celebrity-go/celebrity/hotkeys"
	"github.com/celebrity-go/celebrity/l1cache"
	"github.com/celebrity-go/celebrity/migrate"
	"github.com/celebrity-go/celebrity/ratelimit"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/celebrity-go/celebrity/routing"
	"github.com/celebrity-go/celebrity/stripes"
	"github.com/redis/go-redis/v9"
)

type Post struct{ Title string }

type User struct{ Name string }

type database struct{}

func (database) Post(context.Context, string) (Post, uint64, error) { return Post{}, 0, nil }

var (
	ctx                                  = context.Background()
	rdb, witnessRdb, control             = redis.NewClient(&redis.Options{}), redis.NewClient(&redis.Options{}), redis.NewClient(&redis.Options{})
	shardA, shardB                       = redis.NewClient(&redis.Options{}), redis.NewClient(&redis.Options{})
	db                                   database
	loadUser                             = func(context.Context, string) (User, error) { return User{}, nil }
	loadPost                             = func(context.Context, string) (replicas.Item, error) { return replicas.Item{}, nil }
	viewID, key                          string
	viewedAt                             time.Time
	version                              uint64
	r                                    *replicas.Replicator
)

func main() {
GO
  awk '
    function close_block() { print used "\t}"; used = "" }
    /^## A taste of each package/ { inside = 1 }
    (inside || !first) && /^```go/ { code = 1; print "\t{"; next }
    code && /^```/ { close_block(); if (inside) exit; code = 0; first = 1; next }
    code && /^$/ { close_block(); print "\t{"; next }
    code {
      print "\t" $0
      if (match($0, /^[A-Za-z_][A-Za-z0-9_]*(, [A-Za-z_][A-Za-z0-9_]*)* :=/)) {
        n = split(substr($0, 1, RLENGTH - 3), names, ", ")
        for (i = 1; i <= n; i++) if (names[i] != "_") used = used "\t_ = " names[i] "\n"
      }
    }
  ' README.md
  echo "}"
}

say "go install github.com/celebrity-go/celebrity/cmd/celebrity@$version"
(cd "$tmp" && go install "github.com/celebrity-go/celebrity/cmd/celebrity@$version")
"$GOBIN/celebrity" help >"$tmp/help.txt" 2>&1 || fail "the installed celebrity help failed: $(cat "$tmp/help.txt")"
grep -q ratelimit "$tmp/help.txt" || fail "the installed celebrity printed no usage: $(cat "$tmp/help.txt")"
echo "celebrity help: $(wc -l <"$tmp/help.txt") lines"

say "the library at $version in a go 1.25 module: the README's snippets"
lib=$tmp/lib
newmod "$lib" 1.25.0
(cd "$lib" && go get "github.com/celebrity-go/celebrity@$version")
got=$(cd "$lib" && go mod edit -json | awk -F'"' '$2 == "Go" {print $4; exit}')
[ "$got" = 1.25.0 ] || fail "go get of the library raised the user's go line to $got (README: Go 1.25 or newer)"
readme_program >"$lib/main.go"
(cd "$lib" && go vet . && go build -o /dev/null .) || fail "the README's snippets do not build against $version (program: see above)"
echo "README snippets: $(grep -c . "$lib/main.go") lines built"

say "contrib/otel and contrib/prometheus at $version"
con=$tmp/contrib
newmod "$con" 1.26.0
(cd "$con" && go get "github.com/celebrity-go/celebrity/contrib/otel@$version" \
  "github.com/celebrity-go/celebrity/contrib/prometheus@$version" go.opentelemetry.io/otel)
cat >"$con/main.go" <<'GO'
// The doc examples of contrib/otel and contrib/prometheus, as a user writes them.
package main

import (
	"log"

	"github.com/celebrity-go/celebrity/contrib/otel"
	"github.com/celebrity-go/celebrity/contrib/prometheus"
	"github.com/celebrity-go/celebrity/replicas"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
)

func main() {
	var replicator *replicas.Replicator
	meter := otel.Meter("github.com/celebrity-go/celebrity")
	reg, err := celebrityotel.Replicas(meter, replicator, celebrityotel.Options{Name: "posts"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Unregister()
	if _, err := celebrityprom.Replicas(prometheus.DefaultRegisterer, replicator,
		celebrityprom.Options{Name: "posts"}); err != nil {
		log.Fatal(err)
	}
}
GO
(cd "$con" && go mod tidy && go vet . && go build -o /dev/null .) || fail "the contrib modules' examples do not build against $version"

echo "release rehearsal of $version: ok in $((SECONDS - start))s"
