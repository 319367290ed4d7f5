#!/usr/bin/env bash
# A caught-up consumer of many partitions with and without an incremental fetch session
# (KIP-227), alternated, one broker per round: one 100-byte record into each of PARTITIONS
# partitions, 15 s of quiet, then `laminar bench consume` of all of them (one consumer, polls
# of 100 ms) that reads those records and long-polls 10 s more, sessionless and then with
# --fetch-session (the order swaps every round). Prints the broker's CPU per second and the
# bytes that crossed loopback meanwhile (received, so each byte counts once). Decision 0017.
#
#   bench/scripts/caught-up-fetch-session.sh BINARY [ROUNDS] [PARTITIONS]
set -u
binary=$1
rounds=${2:-2}
partitions=${3:-10000}
port=19340
http=127.0.0.1:$((port + 1))
source "$(dirname "$0")/broker.sh"

loopback_bytes() {
  awk '/^ *lo:/ { printf "%.0f\n", $2 }' /proc/net/dev
}

for round in $(seq 1 "$rounds"); do
  modes="sessionless session"
  [ $((round % 2)) -eq 0 ] && modes="session sessionless"
  data=$(mktemp -d)
  start_broker "$binary"
  "$binary" bench produce --brokers 127.0.0.1:$port --topic caught-up --partitions "$partitions" \
    --num-records "$partitions" --record-size 100 --no-limits >/dev/null 2>&1
  sleep 15
  for mode in $modes; do
    flag=""
    [ "$mode" = session ] && flag=--fetch-session
    cpu_before=$(broker_cpu_s) bytes_before=$(loopback_bytes) start=$(date +%s.%N)
    # It fails after 10 s without a record, which is how it ends here.
    "$binary" bench consume --brokers 127.0.0.1:$port --topic caught-up \
      --num-records $((2 * partitions)) --consumers 1 --idle-timeout-s 10 $flag \
      --no-limits >/dev/null 2>&1
    cpu_after=$(broker_cpu_s) bytes_after=$(loopback_bytes) end=$(date +%s.%N)
    awk -v m="$mode" -v r="$round" -v ca="$cpu_after" -v cb="$cpu_before" \
      -v s="$start" -v e="$end" -v ba="$bytes_after" -v bb="$bytes_before" 'BEGIN {
        printf "round %d %s: broker %.3f core, loopback %.1f MB in %.1f s\n",
          r, m, (ca - cb) / (e - s), (ba - bb) / 1e6, e - s }'
  done
  stop_broker
  rm -rf "$data"
done
