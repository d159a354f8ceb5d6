#!/usr/bin/env bash
# Installs the Redis-compatible servers of the version matrix into a private cache folder and
# prints, for each, a line "NAME PATH" where PATH is an executable that starts the server the
# way redis-server does (pass it as REDIS_SERVER to the tests and to examples.sh).
#
#   scripts/servers.sh                 # install (when missing) and list every server
#   scripts/servers.sh redis-8.0       # only this one
#
# The servers:
#   redis-7.0   the redis-server on PATH (Debian bookworm's package), installed with apt-get
#               when missing and this shell may install packages
#   redis-8.0   Debian trixie's redis-server 8.0
#   valkey-8.1  Debian trixie's valkey-server 8.1
#
# Trixie's binaries need a newer glibc than bookworm's, so they run with trixie's own libc6
# and the libraries they link, unpacked next to them: the launcher starts them through that
# folder's dynamic loader (ld-linux-x86-64.so.2 --library-path ...). Nothing is installed
# system-wide and the system's apt sources are not touched: the .debs are fetched with
# apt-get download against a private source list that names the Debian mirror this machine
# already uses, and unpacked with dpkg-deb -x.
#
# The cache folder is CELEBRITY_SERVERS_CACHE, by default ~/.cache/celebrity/servers.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${CELEBRITY_SERVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/celebrity/servers}
SUITE=trixie
# The libraries trixie's redis-server and valkey-server load, with their own dependencies.
LIBS=(libc6 libatomic1 libjemalloc2 liblzf1 libssl3t64 libsystemd0 libcap2 libzstd1 zlib1g
  libgcc-s1 libstdc++6 liblz4-1 liblzma5 libgcrypt20 libgpg-error0)

log() { printf 'servers.sh: %s\n' "$*" >&2; }

# mirror prints the Debian mirror of this machine's own apt sources.
mirror() {
  local m
  m=$({
    grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
      sed 's/\[[^]]*\]//' | awk '{print $2}'
  } | grep -v -- '-security' | grep -m1 -i debian || true)
  echo "${m:-http://deb.debian.org/debian}"
}

# private_apt runs apt-get with a source list, package lists and a cache of its own.
private_apt() {
  local root=$CACHE/apt
  apt-get -q \
    -o Dir::Etc::SourceList="$root/sources.list" \
    -o Dir::Etc::SourceParts="$root/sources.list.d" \
    -o Dir::State::Lists="$root/lists" \
    -o Dir::Cache="$root/cache" \
    -o APT::Architecture=amd64 \
    -o Debug::NoLocking=1 \
    "$@"
}

fetch_debs() { # fetch_debs DIR PACKAGE...
  local dir=$1 root=$CACHE/apt
  shift
  if [ ! -s "$root/lists.done" ]; then
    mkdir -p "$root/sources.list.d" "$root/lists/partial" "$root/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(mirror) $SUITE main" \
      >"$root/sources.list"
    log "apt-get update ($SUITE, private lists in $root)"
    private_apt update >"$root/update.log" 2>&1 || {
      cat "$root/update.log" >&2
      return 1
    }
    date >"$root/lists.done"
  fi
  mkdir -p "$dir"
  (cd "$dir" && private_apt download "$@" >download.log 2>&1) || {
    cat "$dir/download.log" >&2
    return 1
  }
}

# install_trixie NAME SERVER_PACKAGE TOOLS_PACKAGE BINARY_PREFIX installs one server.
install_trixie() {
  local name=$1 server_pkg=$2 tools_pkg=$3 prefix=$4
  local dir=$CACHE/$name launcher=$CACHE/$name/bin/$prefix-server
  if [ -x "$launcher" ] && "$launcher" --version >/dev/null 2>&1; then
    echo "$launcher"
    return 0
  fi
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
    log "$name needs apt-get and dpkg-deb (Debian or Ubuntu)"
    return 1
  }
  rm -rf "$dir"
  log "installing $name into $dir"
  fetch_debs "$dir/debs" "$server_pkg" "$tools_pkg" "${LIBS[@]}"
  local deb
  for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
  local r=$dir/root ld
  ld=$(find "$r" -name 'ld-linux-x86-64.so.2' | head -n 1)
  [ -n "$ld" ] || {
    log "$name: no ld-linux-x86-64.so.2 in trixie's libc6"
    return 1
  }
  local bin=$r/usr/bin/$prefix-check-rdb
  [ -e "$bin" ] || {
    log "$name: $bin is missing from $tools_pkg"
    return 1
  }
  mkdir -p "$dir/bin"
  # The binary installed as *-check-rdb is the server: it runs as one when its argv[0] does
  # not name the checker (--argv0). exec keeps the PID, so signals reach the server itself.
  cat >"$launcher" <<EOF
#!/bin/sh
# $name from Debian $SUITE, started with its own glibc (see scripts/servers.sh).
exec "$ld" --library-path "$r/usr/lib/x86_64-linux-gnu:$r/lib/x86_64-linux-gnu" \\
  --argv0 $prefix-server "$bin" "\$@"
EOF
  chmod +x "$launcher"
  "$launcher" --version >&2 || {
    log "$name: the installed server does not start"
    return 1
  }
  echo "$launcher"
}

install_system() {
  if ! command -v redis-server >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      log "installing redis-server (apt-get)"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
      # The package starts a system service; the tests start their own servers.
      (service redis-server stop || true) >/dev/null 2>&1
    else
      log "redis-server is missing: install it (apt-get install redis-server)"
      return 1
    fi
  fi
  command -v redis-server
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(redis-7.0 redis-8.0 valkey-8.1)
for n in "${names[@]}"; do
  case $n in
  redis-7.0) p=$(install_system) ;;
  redis-8.0) p=$(install_trixie redis-8.0 redis-server redis-tools redis) ;;
  valkey-8.1) p=$(install_trixie valkey-8.1 valkey-server valkey-tools valkey) ;;
  *)
    log "unknown server $n (known: redis-7.0 redis-8.0 valkey-8.1)"
    exit 2
    ;;
  esac
  echo "$n $p"
done
