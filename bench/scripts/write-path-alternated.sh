#!/usr/bin/env bash
# Broker write-path settings side by side, alternated in one run (docs/decisions/0048). Each run:
# a fresh broker on an empty data dir under DATA_PARENT, `laminar bench produce` of RECORDS 1 KiB
# records to 4 partitions with the harness's defaults, at ACKS; prints MB/s, the produce latency
# p50/p99, the broker's CPU seconds per GB produced and the bytes written to DATA_PARENT's device
# meanwhile (its sectors written, from a `sync` before the produce to one after: the whole
# device, so run on a quiet machine; a process's own write_bytes counts some writes twice).
#
#   bench/scripts/write-path-alternated.sh BINARY ROUNDS ACKS "LABEL=OVERRIDES" ...
#
# e.g. bench/scripts/write-path-alternated.sh target/release/laminar 5 all \
#        "fallocate=laminar.storage.prewrite=false" "prewrite=laminar.storage.prewrite=true"
# OVERRIDES is a space-separated list of key=value; `binary=PATH` among them runs that build of
# the broker for the setting instead (two builds side by side). THROUGHPUT (records/s, default unpaced) paces
# the produce; RECORDS defaults to 1000000; DATA_PARENT to /work (the disk measured). CONSUME=1
# then consumes the records from the start and prints that consume's MB/s and broker CPU per GB.
set -eu
binary=$1
rounds=$2
acks=$3
shift 3
records=${RECORDS:-1000000}
parent=${DATA_PARENT:-/work}
pace=()
[ -n "${THROUGHPUT:-}" ] && pace=(--throughput "$THROUGHPUT")
port=19300
device=$(basename "$(findmnt -n -o SOURCE --target "$parent")")
sectors() { awk '{print $7}' "/sys/block/$device/stat"; }
for round in $(seq 1 "$rounds"); do
  for setting in "$@"; do
    label=${setting%%=*}
    overrides=()
    broker=$binary
    for kv in ${setting#*=}; do
      case $kv in
        binary=*) broker=${kv#binary=} ;;
        *) overrides+=(--override "$kv") ;;
      esac
    done
    data=$(mktemp -d "$parent/write-path.XXXX")
    "$broker" broker --override log.dirs="$data/log" --override listeners=PLAINTEXT://127.0.0.1:$port \
      --override laminar.http.listen=127.0.0.1:$((port + 1)) "${overrides[@]}" >"$data/broker.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    "$binary" topic create t --partitions 4 --brokers 127.0.0.1:$port >/dev/null
    sleep 0.5
    cpu_before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    sync
    sectors_before=$(sectors)
    "$binary" bench produce --brokers 127.0.0.1:$port --topic t --record-size 1024 \
      --num-records "$records" --partitions 4 --acks "$acks" "${pace[@]}" --no-limits \
      --json "$data/produce.json" >/dev/null 2>&1
    cpu=$(awk -v b="$cpu_before" '{printf "%.2f", ($14 + $15 - b) / 100}' "/proc/$pid/stat")
    sync
    written=$(( ($(sectors) - sectors_before) * 512 / 1048576 ))
    if [ -n "${CONSUME:-}" ]; then
      cpu_before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
      "$binary" bench consume --brokers 127.0.0.1:$port --topic t --num-records "$records" --no-limits \
        --json "$data/consume.json" >/dev/null 2>&1
      consume_cpu=$(awk -v b="$cpu_before" '{printf "%.2f", ($14 + $15 - b) / 100}' "/proc/$pid/stat")
      python3 - "$data/consume.json" "$round" "$label" "$consume_cpu" <<'PY'
import json, sys
path, round_, label, cpu = sys.argv[1:]
r = json.load(open(path))
print(f"round {round_} {label:>12} consume: {r['mb_per_sec']:8.1f} MB/s  broker CPU {float(cpu):.2f} s ({float(cpu) / (r['bytes'] / 1e9):.2f} s/GB)")
PY
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    python3 - "$data/produce.json" "$round" "$label" "$acks" "$cpu" "$written" <<'PY'
import json, sys
path, round_, label, acks, cpu, written = sys.argv[1:]
r = json.load(open(path))
gb = r["bytes"] / 1e9
print(f"round {round_} {label:>12} acks={acks}: {r['mb_per_sec']:8.1f} MB/s  p50 {r['latency_ms_p50']:.2f} ms  "
      f"p99 {r['latency_ms_p99']:.2f} ms  broker CPU {float(cpu):.2f} s ({float(cpu) / gb:.2f} s/GB)  written {written} MiB")
PY
    rm -rf "$data"
  done
done
