#!/usr/bin/env bash
# Two or more builds' consumers alternated against one broker: what the harness's client adds to
# the consume points (decision 0029, bench scale and its goals). One broker (BROKER, default the first client
# binary) on a data directory of its own; a topic of PARTITIONS partitions takes MIB MiB of 1 KiB
# records in 16 KiB batches from four producers; after 20 s, each round consumes the whole topic
# once per consumer count and client binary, in turn. Each line: MB/s, the broker's CPU seconds,
# and the client's user and system seconds and minor faults (`/usr/bin/time`), faults in the
# warm-up included.
#
#   bench/scripts/consume-clients-alternated.sh "BINARY..." ["COUNTS"] [ROUNDS] [PARTITIONS] [MIB]
set -u
clients=$1
counts=${2:-"16 4 64"}
rounds=${3:-3}
partitions=${4:-1000}
mib=${5:-1024}
broker=${BROKER:-${clients%% *}}
port=19330
http=127.0.0.1:$((port + 1))
records=$((mib * 1024))
source "$(dirname "$0")/broker.sh"

data=$(mktemp -d)
start_broker "$broker"
"$broker" bench produce --brokers 127.0.0.1:$port --topic alternated --partitions "$partitions" \
  --num-records "$records" --producers 4 --batch-bytes 16384 --no-limits >/dev/null 2>&1
sleep 20
times=$(mktemp)
for round in $(seq 1 "$rounds"); do
  for consumers in $counts; do
    for client in $clients; do
      json=$(mktemp)
      before=$(broker_cpu_s)
      /usr/bin/time -f "%U %S %R" -o "$times" "$client" bench consume --brokers 127.0.0.1:$port \
        --topic alternated --num-records "$records" --consumers "$consumers" --no-limits \
        --json "$json" >/dev/null 2>&1
      after=$(broker_cpu_s)
      read -r user system faults <"$times"
      mb=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['mb_per_sec']))" "$json")
      cpu=$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.2f", a - b }')
      echo "round $round, $consumers consumers, $client: $mb MB/s, broker CPU ${cpu} s, client ${user} s user ${system} s system, $faults faults"
      rm -f "$json"
    done
  done
done
rm -f "$times"
stop_broker
rm -rf "$data"
