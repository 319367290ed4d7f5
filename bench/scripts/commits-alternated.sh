#!/usr/bin/env bash
# Asynchronous offset commits against two broker builds, alternated in one run (this VM is
# noisy: compare within a run). Each run starts a fresh broker on an empty data dir under
# DATA_PARENT, then the AFTER binary's `laminar bench commits` sends COMMITS OffsetCommit
# requests with up to IN_FLIGHT unanswered on one connection, and measures the fdatasync
# latency of the same disk in a round after it. Prints each run's summary line.
#
#   bench/scripts/commits-alternated.sh BEFORE_BINARY AFTER_BINARY [PAIRS] [COMMITS] [IN_FLIGHT] [DATA_PARENT]
#
# A build that stalls on pipelined commits is stopped after 120 s and reported as such.
set -u
source "$(dirname "$0")/broker.sh"
before=$1
after=$2
pairs=${3:-3}
commits=${4:-10000}
in_flight=${5:-100}
parent=${6:-$(mktemp -d)}
port=19300
http=127.0.0.1:19301
for pair in $(seq 1 "$pairs"); do
  for which in before after; do
    binary=$before
    [ "$which" = after ] && binary=$after
    data=$(mktemp -d "$parent/data.XXXX")
    start_broker "$binary"
    summary=$(timeout 120 "$after" bench commits --brokers 127.0.0.1:$port --commits "$commits" \
      --in-flight "$in_flight" --rounds 1 --sync-dir "$data" 2>&1 | grep -E '^(round 0|Error)' | head -1)
    [ -z "$summary" ] && summary="no answer within 120 s"
    stop_broker
    echo "$which pair $pair: $summary"
    rm -rf "$data"
  done
done
