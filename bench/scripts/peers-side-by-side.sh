#!/usr/bin/env bash
# Laminar and its peers on this machine, alternated in one run (docs/peers.md). Each round starts
# each broker fresh on an empty data dir under DATA_PARENT and measures, with the same 1 KiB
# records, 4 partitions, one producer and batches of up to 256 KiB:
#   - Kafka-protocol brokers (Laminar; nisshi, formerly Tansu) with `laminar bench`: produce of
#     RECORDS records at acks=1, then again at acks=all into another topic, then a consume of
#     the first topic;
#   - Apache Iggy (its own protocol) with its own `iggy-bench`: a balanced producer over 4
#     partitions, then a consumer group of one reading them back.
# Prints one line per measurement: MB/s, p99 where the tool gives it, and the broker process's
# CPU seconds per GB.
#
#   bench/scripts/peers-side-by-side.sh ROUNDS PEER...
#
# PEER is one of
#   laminar=BINARY                 Laminar with its defaults (fdatasync before acks=all answers)
#   nisshi-memory=BINARY           nisshi with memory:// storage (nothing on disk)
#   nisshi-sqlite=BINARY           nisshi with sqlite:// storage in the data dir
#   iggy=SERVER,BENCH,CONFIG       iggy-server with its source's config.toml (CONFIG; no fsync),
#                                  driven by iggy-bench
#   iggy-fsync=SERVER,BENCH,CONFIG the same with a topic created with enforce_fsync (fsync per write)
# LAMINAR (default target/release/laminar) is the `laminar bench` client; RECORDS defaults to
# 1000000 (SQLITE_RECORDS, 100000, for nisshi-sqlite); DATA_PARENT to /work. The peers are built from their public sources outside this
# repository; docs/peers.md says how.
set -eu
rounds=$1
shift
client=${LAMINAR:-target/release/laminar}
all_records=${RECORDS:-1000000}
# nisshi's SQLite store consumes at a few MB/s: fewer records keep its rounds short.
sqlite_records=${SQLITE_RECORDS:-100000}
parent=${DATA_PARENT:-/work}
port=19400
set_records() { records=$1; gb=$(awk -v n="$records" 'BEGIN { printf "%.4f", n * 1024 / 1e9 }'); }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
cpu_per_gb() { awk -v b="$2" -v a="$(cpu_ticks "$1")" -v hz="$(getconf CLK_TCK)" -v gb="$gb" \
  'BEGIN { printf "%.2f", (a - b) / hz / gb }'; }
# Refuses to measure whatever already listens on the port (a broker left from another run).
port_free() { ! (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null || { echo "port $port is taken" >&2; exit 1; }; }
wait_port() { for _ in $(seq 1 100); do (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.2; done; return 1; }

# One `laminar bench` run against the broker of process $1; prints "MB/s p99_ms cpu_s_per_GB".
kafka_bench() {
  local pid=$1 kind=$2 topic=$3 acks=${4:-1} before json
  json=$(mktemp)
  before=$(cpu_ticks "$pid")
  if [ "$kind" = produce ]; then
    "$client" bench produce --brokers 127.0.0.1:$port --topic "$topic" --partitions 4 --replication-factor 1 \
      --record-size 1024 --num-records "$records" --acks "$acks" --no-limits --json "$json" >/dev/null 2>&1
  else
    "$client" bench consume --brokers 127.0.0.1:$port --topic "$topic" --num-records "$records" \
      --no-limits --json "$json" >/dev/null 2>&1
  fi
  echo "$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.1f %.1f" % (r["mb_per_sec"], r.get("latency_ms_p99", float("nan"))))
' "$json")" "$(cpu_per_gb "$pid" "$before")"
  rm -f "$json"
}

# run_kafka_peer LABEL DATA_DIR COMMAND...: starts the broker COMMAND, measures, stops it.
run_kafka_peer() {
  local label=$1 data=$2 pid
  shift 2
  port_free
  "$@" >"$data/broker.log" 2>&1 &
  pid=$!
  wait_port $port
  sleep 1
  echo "$label produce acks=1: $(kafka_bench $pid produce one 1)"
  echo "$label produce acks=all: $(kafka_bench $pid produce all all)"
  echo "$label consume: $(kafka_bench $pid consume one)"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

# iggy-bench prints a summary line with "Total throughput: N MB/s"; prints "MB/s p99_ms cpu".
iggy_bench() {
  local pid=$1 bench=$2 before out
  shift 2
  before=$(cpu_ticks "$pid")
  out=$("$bench" --message-size 1024 --messages-per-batch 256 --message-batches $((records / 256)) "$@" \
    tcp --server-address 127.0.0.1:$port 2>&1 || true)
  echo "$(echo "$out" | python3 -c '
import re, sys
text = sys.stdin.read()
mb = re.findall(r"[Tt]otal throughput: ([0-9.]+) MB/s", text)
p99 = re.findall(r"p99 latency: ([0-9.]+) ms", text)
print("%.1f %.1f" % (float(mb[-1]) if mb else 0, float(p99[-1]) if p99 else float("nan")))
')" "$(cpu_per_gb "$pid" "$before")"
}

run_iggy() {
  local label=$1 data=$2 fsync=$3 server bench config pid
  IFS=, read -r server bench config <<<"$4"
  port_free
  IGGY_CONFIG_PATH="$config" IGGY_SYSTEM_PATH="$data/iggy" IGGY_TCP_ADDRESS=127.0.0.1:$port IGGY_HTTP_ENABLED=false \
    IGGY_QUIC_ENABLED=false IGGY_WEBSOCKET_ENABLED=false \
    IGGY_ROOT_USERNAME=iggy IGGY_ROOT_PASSWORD=iggy "$server" >"$data/server.log" 2>&1 &
  pid=$!
  wait_port $port
  sleep 1
  local fsync_flag=()
  [ "$fsync" = true ] && fsync_flag=(--enforce-fsync)
  echo "$label produce: $(iggy_bench $pid "$bench" "${fsync_flag[@]}" balanced-producer --partitions 4 --producers 1)"
  echo "$label consume: $(iggy_bench $pid "$bench" --reuse-streams balanced-consumer-group --consumers 1)"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

echo "records=$all_records of 1 KiB ($sqlite_records for nisshi-sqlite), 4 partitions; figures: MB/s p99_ms broker_cpu_s_per_GB"
for round in $(seq 1 "$rounds"); do
  for peer in "$@"; do
    label=${peer%%=*}
    binary=${peer#*=}
    data=$(mktemp -d "$parent/peers.XXXX")
    set_records "$([ "$label" = nisshi-sqlite ] && echo "$sqlite_records" || echo "$all_records")"
    case $label in
      laminar) run_kafka_peer "round $round $label" "$data" "$binary" broker --override log.dirs="$data/log" \
        --override listeners=PLAINTEXT://127.0.0.1:$port --override laminar.http.listen=127.0.0.1:$((port + 1)) ;;
      nisshi-*) run_kafka_peer "round $round $label" "$data" "$binary" broker \
        --listener-url tcp://127.0.0.1:$port --advertised-listener-url tcp://127.0.0.1:$port \
        --storage-engine "$([ "$label" = nisshi-memory ] && echo memory://nisshi/ || echo "sqlite:///$data/nisshi.db")" ;;
      iggy) run_iggy "round $round $label" "$data" false "$binary" ;;
      iggy-fsync) run_iggy "round $round $label" "$data" true "$binary" ;;
      *) echo "unknown peer $label" >&2; exit 2 ;;
    esac
    rm -rf "$data"
  done
done
