#!/usr/bin/env bash
# Compares two broker builds side by side, alternated in one run (this VM is noisy: compare
# ratios of medians, not single runs). Each run starts a fresh broker on an empty data dir,
# produces 1 M records of 1 KiB to 4 partitions, then consumes them; prints MB/s per run.
#
#   bench/scripts/compare-builds.sh BEFORE_BINARY AFTER_BINARY [PAIRS] [ACKS] [DATA_PARENT]
#
# ACKS is 1 (default), all or 0. DATA_PARENT (default: a temporary directory) must be on the
# disk to measure. The AFTER binary's `laminar bench` drives both.
set -u
before=$1
after=$2
pairs=${3:-3}
acks=${4:-1}
parent=${5:-$(mktemp -d)}
port=19200
mb_per_sec() { python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['mb_per_sec'], 1))" "$1"; }
for pair in $(seq 1 "$pairs"); do
  for which in before after; do
    binary=$before
    [ "$which" = after ] && binary=$after
    data=$(mktemp -d "$parent/data.XXXX")
    "$binary" broker --override log.dirs="$data" --override listeners=PLAINTEXT://127.0.0.1:$port \
      --override laminar.http.listen=127.0.0.1:$((port + 1)) >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    "$after" bench produce --brokers 127.0.0.1:$port --topic p --record-size 1024 \
      --num-records 1000000 --acks "$acks" --partitions 4 --no-limits --json "$data.p.json" >/dev/null 2>&1
    "$after" bench consume --brokers 127.0.0.1:$port --topic p --num-records 1000000 \
      --no-limits --json "$data.c.json" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null
    echo "$which pair $pair: produce $(mb_per_sec "$data.p.json") MB/s, consume $(mb_per_sec "$data.c.json") MB/s"
    rm -rf "$data" "$data.p.json" "$data.c.json"
  done
done
