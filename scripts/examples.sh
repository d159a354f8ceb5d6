#!/usr/bin/env bash
# Runs every example in examples/ three times: against a real standalone redis-server,
# against a real Redis Cluster of three masters, and against the embedded default (no server
# configured). Both servers are plain redis-server processes that this script starts on free
# loopback ports and stops when it exits. An example fails the run when it exits non-zero,
# that is, when one of its invariants broke or it could not run.
#
#   scripts/examples.sh            # every example
#   scripts/examples.sh celebrity  # only these
#   EXAMPLES_VERBOSE=1 scripts/examples.sh   # print every run's output, not only failures
#   EXAMPLES_MODES="standalone cluster" scripts/examples.sh   # only these of the three runs
#   REDIS_SERVER=path scripts/examples.sh     # another server (scripts/servers.sh lists them)
set -euo pipefail
cd "$(dirname "$0")/.."

REDIS_SERVER=${REDIS_SERVER:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}
EXAMPLE_TIMEOUT=${EXAMPLE_TIMEOUT:-150}
for tool in "$REDIS_SERVER" "$REDIS_CLI"; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "examples.sh: $tool is missing (apt-get install redis-server)" >&2
    exit 1
  }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/celebrity-examples.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server DIR EXTRA_ARGS... starts a redis-server on a free port (the cluster bus port,
# port+10000, must be free too) and sets started_port. It must not run in a subshell ($(...)):
# the server's PID has to reach pids, or cleanup would leave it running.
start_server() {
  local dir=$1
  shift
  mkdir -p "$dir"
  local try port
  for try in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null ||
      (exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null; then
      continue
    fi
    "$REDIS_SERVER" --bind 127.0.0.1 --port "$port" --dir "$dir" --save '' --appendonly no \
      --logfile "$dir/redis.log" "$@" >/dev/null 2>&1 &
    local pid=$!
    pids+=("$pid")
    local i
    for i in $(seq 1 100); do
      if "$REDIS_CLI" -p "$port" ping >/dev/null 2>&1; then
        started_port=$port
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
  done
  echo "examples.sh: could not start redis-server (see $dir/redis.log)" >&2
  return 1
}

echo "starting a standalone server and a 3-master cluster: $("$REDIS_SERVER" --version)"
start_server "$work/standalone"
standalone=$started_port
cluster_ports=()
for i in 1 2 3; do
  start_server "$work/cluster$i" --cluster-enabled yes \
    --cluster-config-file "$work/cluster$i/nodes.conf" --cluster-node-timeout 3000
  cluster_ports+=("$started_port")
done
"$REDIS_CLI" --cluster create "${cluster_ports[@]/#/127.0.0.1:}" --cluster-replicas 0 \
  --cluster-yes >"$work/cluster-create.log" 2>&1 || {
  cat "$work/cluster-create.log" >&2
  exit 1
}
for p in "${cluster_ports[@]}"; do
  for i in $(seq 1 200); do
    "$REDIS_CLI" -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
    [ "$i" = 200 ] && { echo "examples.sh: cluster did not become ok" >&2; exit 1; }
    sleep 0.05
  done
done
cluster_addrs=$(printf '127.0.0.1:%s,' "${cluster_ports[@]}")
cluster_addrs=${cluster_addrs%,}
echo "standalone 127.0.0.1:$standalone; cluster $cluster_addrs"

if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for d in examples/*/; do
    d=${d%/}
    [ -f "$d/main.go" ] && names+=("${d#examples/}")
  done
fi

echo "building ${names[*]}"
build_start=$SECONDS
(cd examples && go build -o "$work/bin/" $(printf './%s ' "${names[@]}"))
echo "built in $((SECONDS - build_start))s"

passed=0
failed=0
failures=()
run() { # run NAME MODE ENV...
  local name=$1 mode=$2
  shift 2
  local log="$work/$name-$mode.log" start=$SECONDS rc=0
  env -u REDIS_ADDR -u REDIS_CLUSTER_ADDRS "$@" timeout "$EXAMPLE_TIMEOUT" "$work/bin/$name" >"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    printf 'ok    %-10s %-10s %3ds  %s\n' "$name" "$mode" $((SECONDS - start)) "$(tail -n 1 "$log")"
    if [ -n "${EXAMPLES_VERBOSE:-}" ]; then sed 's/^/      | /' "$log"; fi
  else
    failed=$((failed + 1))
    failures+=("$name/$mode")
    printf 'FAIL  %-10s %-10s %3ds  exit %s\n' "$name" "$mode" $((SECONDS - start)) "$rc"
    sed 's/^/      | /' "$log"
  fi
}
modes=" ${EXAMPLES_MODES:-standalone cluster embedded} "
for name in "${names[@]}"; do
  if [[ $modes == *" standalone "* ]]; then
    run "$name" standalone REDIS_ADDR="127.0.0.1:$standalone"
  fi
  if [[ $modes == *" cluster "* ]]; then
    # Examples that need several shards put the others on databases of REDIS_ADDR.
    run "$name" cluster REDIS_CLUSTER_ADDRS="$cluster_addrs" REDIS_ADDR="127.0.0.1:$standalone"
  fi
  if [[ $modes == *" embedded "* ]]; then
    run "$name" embedded
  fi
done

echo "examples: $passed passed, $failed failed"
if [ "$failed" -gt 0 ]; then
  echo "failed: ${failures[*]}" >&2
  exit 1
fi
