#!/usr/bin/env bash
# K `tern serve` instances on loopback ports behind HAProxy (affinity on the
# prompt's leading part, keys spread evenly, health checks, retries): a
# laptop cluster and the model of a real deployment (docs/deploy.md).
#
#   scripts/cluster.sh up [options] [-- extra tern serve flags]
#   scripts/cluster.sh status      [--run-dir DIR]
#   scripts/cluster.sh restart I   [--run-dir DIR]   (re)start instance I (0-based)
#   scripts/cluster.sh down        [--run-dir DIR]
#
# up options (environment variables of the same meaning in brackets):
#   -n K                    instances (default 3)                      [INSTANCES]
#   -m MODEL                GGUF model (default $TERN_MODELS_DIR or ../shared/models,
#                           stories260K.gguf)                          [MODEL]
#   -t N                    threads per instance (default 1)           [THREADS]
#   --port P                HAProxy's API port (default 8080; 0 = a free one) [PORT]
#   --stats-port P          HAProxy's stats port (default 8404; 0 = free) [STATS_PORT]
#   --base-port P           instance i listens on P+i (default 8081; 0 = free ones) [BASE_PORT]
#   --kv-cache-memory SIZE  per instance (default 64MiB)               [KV_CACHE_MEMORY]
#   --balance sticky|hash|roundrobin  affinity by a stick table, new keys dealt
#                           round robin (default); by consistent hashing with
#                           bounded loads; or none [BALANCE]
#   --balance-factor F      hash: hash-balance-factor, % of the mean load (default 150) [BALANCE_FACTOR]
#   --stick-expire T        sticky: a key idle this long is forgotten (default 30m) [STICK_EXPIRE]
#   --key-bytes K           prompt bytes that pick the instance (default 256) [KEY_BYTES]
#   --check-inter T         health-check interval (default 1s)         [CHECK_INTER]
#   --run-dir DIR           pids, logs, haproxy.cfg, cluster.env       [RUN_DIR]
#                           (default ${TMPDIR:-/tmp}/tern-cluster)
#
# `up` returns once every instance answers /health and HAProxy counts it up;
# it writes DIR/cluster.env (FRONT_URL, STATS_URL, INSTANCE_URLS, ...) for
# scripts to source. `down` stops exactly the processes `up` and `restart`
# started (their pids are in DIR), TERM first, KILL after 10 s.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TERN=${TERN:-$repo/build/tern}
HAPROXY=${HAPROXY:-haproxy}
INSTANCES=${INSTANCES:-3}
MODEL=${MODEL:-${TERN_MODELS_DIR:-$repo/../shared/models}/stories260K.gguf}
THREADS=${THREADS:-1}
PORT=${PORT:-8080}
STATS_PORT=${STATS_PORT:-8404}
BASE_PORT=${BASE_PORT:-8081}
KV_CACHE_MEMORY=${KV_CACHE_MEMORY:-64MiB}
BALANCE=${BALANCE:-sticky}
KEY_BYTES=${KEY_BYTES:-256}
BALANCE_FACTOR=${BALANCE_FACTOR:-150}
STICK_EXPIRE=${STICK_EXPIRE:-30m}
CHECK_INTER=${CHECK_INTER:-1s}
RUN_DIR=${RUN_DIR:-${TMPDIR:-/tmp}/tern-cluster}
EXTRA=()

die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

# A free TCP port on 127.0.0.1 (the kernel's pick).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

http_code() { curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null; }

# Whether pid $1 runs (a zombie waiting for its reaper does not).
running() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z ]]
}

alive() { [[ -f "$1" ]] && running "$(cat "$1")"; }

# Stops the process whose pid is in file $1: TERM, then KILL after 10 s.
stop_pidfile() {
  local f=$1 pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  if running "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 100); do running "$pid" || break; sleep 0.1; done
    running "$pid" && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

start_instance() {  # i
  local i=$1
  [[ -f "$RUN_DIR/inst$i.cmd" ]] || die "no instance $i in $RUN_DIR"
  alive "$RUN_DIR/inst$i.pid" && die "instance $i is running (pid $(cat "$RUN_DIR/inst$i.pid"))"
  local -a cmd
  mapfile -t cmd <"$RUN_DIR/inst$i.cmd"
  "${cmd[@]}" >>"$RUN_DIR/inst$i.log" 2>&1 &
  echo $! >"$RUN_DIR/inst$i.pid"
}

wait_healthy() {  # url pidfile seconds
  local url=$1 pidfile=$2 deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    [[ "$(http_code "$url/health")" == 200 ]] && return 0
    alive "$pidfile" || return 1
    sleep 0.1
  done
  return 1
}

# Servers of backend tern that HAProxy counts UP (from the stats CSV).
servers_up() {
  curl -s -m 2 "$STATS_URL/stats;csv" 2>/dev/null |
    awk -F, '$1=="tern" && $2!="BACKEND" && $2!="FRONTEND" && $18 ~ /^UP/ {n++} END {print n+0}'
}

load_env() {
  [[ -f "$RUN_DIR/cluster.env" ]] || die "no cluster in $RUN_DIR (run 'up' first)"
  # shellcheck disable=SC1091
  source "$RUN_DIR/cluster.env"
}

write_config() {
  local servers="" i
  for ((i = 0; i < INSTANCES; ++i)); do
    servers+="    server tern$i 127.0.0.1:${INSTANCE_PORTS[$i]}"$'\n'
  done
  local balance
  case $BALANCE in
    sticky) balance=roundrobin ;;
    hash) balance="hash var(txn.route_key)" ;;
    *) balance=roundrobin ;;
  esac
  local template="$repo/deploy/haproxy/haproxy.cfg.in"
  local affinity="$repo/deploy/haproxy/affinity/$BALANCE.cfg.in"
  [[ -f "$template" ]] || { echo "cluster.sh: template not found: $template" >&2; return 1; }
  [[ -f "$affinity" ]] || { echo "cluster.sh: template not found: $affinity" >&2; return 1; }
  python3 - "$template" "$RUN_DIR/haproxy.cfg" "$affinity" <<EOF
import sys
text = open(sys.argv[1]).read()
text = text.replace("@AFFINITY@\n", open(sys.argv[3]).read())
for k, v in {"STICK_EXPIRE": "$STICK_EXPIRE", "BIND": "127.0.0.1:$PORT", "STATS_BIND": "127.0.0.1:$STATS_PORT",
             "KEY_BYTES": "$KEY_BYTES", "BALANCE": "$balance",
             "BALANCE_FACTOR": "$BALANCE_FACTOR",
             "CHECK_INTER": "$CHECK_INTER", "SERVERS": """$servers""".rstrip("\n")}.items():
    text = text.replace("@" + k + "@", v)
open(sys.argv[2], "w").write(text)
EOF
}

cmd_up() {
  while (($#)); do
    case $1 in
      -n) INSTANCES=$2; shift 2 ;;
      -m) MODEL=$2; shift 2 ;;
      -t) THREADS=$2; shift 2 ;;
      --port) PORT=$2; shift 2 ;;
      --stats-port) STATS_PORT=$2; shift 2 ;;
      --base-port) BASE_PORT=$2; shift 2 ;;
      --kv-cache-memory) KV_CACHE_MEMORY=$2; shift 2 ;;
      --balance) BALANCE=$2; shift 2 ;;
      --key-bytes) KEY_BYTES=$2; shift 2 ;;
      --balance-factor) BALANCE_FACTOR=$2; shift 2 ;;
      --stick-expire) STICK_EXPIRE=$2; shift 2 ;;
      --check-inter) CHECK_INTER=$2; shift 2 ;;
      --run-dir) RUN_DIR=$2; shift 2 ;;
      --) shift; EXTRA=("$@"); break ;;
      *) die "up: unknown option '$1' (see scripts/cluster.sh --help)" ;;
    esac
  done
  [[ "$INSTANCES" =~ ^[1-9][0-9]*$ ]] || die "-n: expected a positive count, got '$INSTANCES'"
  [[ "$KEY_BYTES" =~ ^[1-9][0-9]*$ ]] || die "--key-bytes: expected a positive count, got '$KEY_BYTES'"
  [[ "$BALANCE_FACTOR" =~ ^[0-9]+$ ]] || die "--balance-factor: expected a percentage, got '$BALANCE_FACTOR'"
  [[ "$BALANCE" == sticky || "$BALANCE" == hash || "$BALANCE" == roundrobin ]] ||
    die "--balance: expected sticky, hash or roundrobin, got '$BALANCE'"
  [[ "$STICK_EXPIRE" =~ ^[1-9][0-9]*(ms|s|m|h|d)?$ ]] ||
    die "--stick-expire: expected a time such as 30m, got '$STICK_EXPIRE'"
  [[ -f "$MODEL" ]] || die "model not found: $MODEL (-m MODEL)"
  [[ -x "$TERN" ]] || die "tern binary not found at $TERN (build it, or set TERN)"
  command -v "$HAPROXY" >/dev/null || die "haproxy not found (make deps installs it)"
  command -v curl >/dev/null || die "curl not found (make deps installs it)"
  mkdir -p "$RUN_DIR" || die "cannot create $RUN_DIR"
  [[ -f "$RUN_DIR/cluster.env" ]] && die "a cluster is up in $RUN_DIR ('down' first)"
  rm -f "$RUN_DIR"/inst*.log "$RUN_DIR"/haproxy.log

  [[ "$PORT" == 0 ]] && PORT=$(free_port)
  [[ "$STATS_PORT" == 0 ]] && STATS_PORT=$(free_port)
  INSTANCE_PORTS=()
  local i urls=""
  for ((i = 0; i < INSTANCES; ++i)); do
    if [[ "$BASE_PORT" == 0 ]]; then INSTANCE_PORTS+=("$(free_port)"); else INSTANCE_PORTS+=($((BASE_PORT + i))); fi
    printf '%s\n' "$TERN" serve -m "$MODEL" --host 127.0.0.1 --port "${INSTANCE_PORTS[$i]}" \
      -t "$THREADS" --kv-cache-memory "$KV_CACHE_MEMORY" "${EXTRA[@]}" >"$RUN_DIR/inst$i.cmd"
    urls+="${urls:+,}http://127.0.0.1:${INSTANCE_PORTS[$i]}"
  done
  STATS_URL="http://127.0.0.1:$STATS_PORT"
  cat >"$RUN_DIR/cluster.env" <<EOF
FRONT_URL=http://127.0.0.1:$PORT
STATS_URL=$STATS_URL
INSTANCE_URLS=$urls
INSTANCES=$INSTANCES
BALANCE=$BALANCE
KEY_BYTES=$KEY_BYTES
CHECK_INTER=$CHECK_INTER
EOF
  write_config || { cmd_down; die "cannot write $RUN_DIR/haproxy.cfg"; }
  "$HAPROXY" -c -q -f "$RUN_DIR/haproxy.cfg" || { cmd_down; die "haproxy rejects $RUN_DIR/haproxy.cfg"; }

  for ((i = 0; i < INSTANCES; ++i)); do start_instance "$i"; done
  "$HAPROXY" -db -f "$RUN_DIR/haproxy.cfg" >"$RUN_DIR/haproxy.log" 2>&1 &
  echo $! >"$RUN_DIR/haproxy.pid"

  for ((i = 0; i < INSTANCES; ++i)); do
    if ! wait_healthy "http://127.0.0.1:${INSTANCE_PORTS[$i]}" "$RUN_DIR/inst$i.pid" 120; then
      tail -n 20 "$RUN_DIR/inst$i.log" >&2
      cmd_down
      die "instance $i did not become healthy (log above)"
    fi
  done
  local deadline=$((SECONDS + 30))
  until [[ "$(servers_up)" == "$INSTANCES" ]]; do
    if ((SECONDS >= deadline)) || ! alive "$RUN_DIR/haproxy.pid"; then
      tail -n 20 "$RUN_DIR/haproxy.log" >&2
      cmd_down
      die "HAProxy does not count every instance up (log above)"
    fi
    sleep 0.1
  done
  echo "cluster.sh: $INSTANCES instances up behind HAProxy ($BALANCE): http://127.0.0.1:$PORT" \
       "(stats $STATS_URL/stats, run dir $RUN_DIR)"
}

cmd_status() {
  load_env
  local i rc=0
  alive "$RUN_DIR/haproxy.pid" && echo "haproxy  pid $(cat "$RUN_DIR/haproxy.pid")  $FRONT_URL" ||
    { echo "haproxy  down"; rc=1; }
  IFS=, read -ra urls <<<"$INSTANCE_URLS"
  for ((i = 0; i < INSTANCES; ++i)); do
    if alive "$RUN_DIR/inst$i.pid"; then
      echo "tern$i    pid $(cat "$RUN_DIR/inst$i.pid")  ${urls[$i]}  /health $(http_code "${urls[$i]}/health")"
    else
      echo "tern$i    down  ${urls[$i]}"; rc=1
    fi
  done
  echo "HAProxy counts $(servers_up) of $INSTANCES up"
  return $rc
}

cmd_restart() {
  local i=${1:-}
  [[ "$i" =~ ^[0-9]+$ ]] || die "restart: expected an instance number, got '$i'"
  shift
  [[ "${1:-}" == --run-dir ]] && RUN_DIR=$2
  load_env
  ((i < INSTANCES)) || die "restart: no instance $i (0..$((INSTANCES - 1)))"
  stop_pidfile "$RUN_DIR/inst$i.pid"
  start_instance "$i"
  IFS=, read -ra urls <<<"$INSTANCE_URLS"
  wait_healthy "${urls[$i]}" "$RUN_DIR/inst$i.pid" 120 || die "instance $i did not become healthy"
  echo "cluster.sh: tern$i healthy again at ${urls[$i]}"
}

cmd_down() {
  local f
  # HAProxy first: an instance stops sooner without its idle connections.
  for f in "$RUN_DIR"/haproxy.pid "$RUN_DIR"/inst*.pid; do
    [[ -e "$f" ]] && stop_pidfile "$f"
  done
  rm -f "$RUN_DIR/cluster.env"
  return 0
}

what=${1:-}
shift || true
case $what in
  up) cmd_up "$@" ;;
  status) [[ "${1:-}" == --run-dir ]] && RUN_DIR=$2; cmd_status ;;
  restart) cmd_restart "$@" ;;
  down) [[ "${1:-}" == --run-dir ]] && RUN_DIR=$2; cmd_down; echo "cluster.sh: down ($RUN_DIR)" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
