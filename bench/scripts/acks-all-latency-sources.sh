#!/usr/bin/env bash
# Where acks=all latency goes at a fixed rate: a fresh broker (MODE: laminar.storage.write_mode)
# on a data dir under DATA_PARENT, `laminar bench produce` of RECORDS 1 KiB records to 4
# partitions at acks=all and RATE records/s, then the broker's own histograms from /metrics: the
# Produce request's latency, the fdatasyncs', and the durability wait's (log2 buckets, so each
# quantile is given as the bucket's upper bound). Compare with bench/scripts/acks-all-disk-floor.py.
#
#   bench/scripts/acks-all-latency-sources.sh BINARY MODE RATE RECORDS
#   e.g. bench/scripts/acks-all-latency-sources.sh target/release/laminar direct 350000 3500000
set -eu
bin=$1 mode=$2 rate=$3 records=$4
port=19600
data=$(mktemp -d "${DATA_PARENT:-/work}/latency-sources.XXXX")
"$bin" broker --override log.dirs="$data/log" --override listeners=PLAINTEXT://127.0.0.1:$port \
  --override laminar.http.listen=127.0.0.1:$((port + 1)) --override laminar.storage.write_mode="$mode" \
  >"$data/broker.log" 2>&1 &
pid=$!
for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
"$bin" topic create t --partitions 4 --brokers 127.0.0.1:$port >/dev/null
sleep 0.5
"$bin" bench produce --brokers 127.0.0.1:$port --topic t --record-size 1024 --num-records "$records" \
  --partitions 4 --acks all --throughput "$rate" --no-limits --json "$data/produce.json" >/dev/null 2>&1
curl -s "http://127.0.0.1:$((port + 1))/metrics" >"$data/metrics.txt"
kill "$pid"
wait "$pid" 2>/dev/null || true
python3 - "$data/produce.json" "$data/metrics.txt" "$mode" <<'PY'
import collections, json, re, sys
produce, metrics, mode = sys.argv[1:]
r = json.load(open(produce))
print(f"{mode}: client {r['mb_per_sec']:.0f} MB/s, p50 {r['latency_ms_p50']:.2f} ms, p99 {r['latency_ms_p99']:.2f} ms")
wanted = ("laminar_kafka_request_latency_seconds", "laminar_storage_fdatasync_latency_seconds",
          "laminar_storage_durability_wait_seconds")
buckets = collections.defaultdict(lambda: collections.defaultdict(float))
for line in open(metrics):
    m = re.match(r'(\w+)_bucket\{(.*)le="([^"]+)"\} (\S+)', line)
    if not m or m[1] not in wanted:
        continue
    if m[1] == wanted[0] and not re.search(r'request="[Pp]roduce"', m[2]):
        continue
    buckets[m[1]][float("inf") if m[3] == "+Inf" else float(m[3])] += float(m[4])
for name in wanted:
    b = buckets[name]
    les = sorted(b)
    total = b[les[-1]] if les else 0
    bound = lambda p: next((le * 1e3 for le in les if b[le] >= p * total), float("nan"))
    print(f"  {name}: {total:.0f}, p50 <= {bound(.5):.2f} ms, p99 <= {bound(.99):.2f} ms")
PY
rm -rf "$data"
