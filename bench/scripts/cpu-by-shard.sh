#!/usr/bin/env bash
# Where one throughput point's CPU goes: each shard's, and the client's (decision 0025, small
# requests and connections that move). A fresh broker on a fresh ext4 image (needs root for the mount); for `produce`, a topic of
# PARTITIONS partitions takes 1 GiB of 1 KiB records from CLIENTS producers in 16 KiB batches
# (keyed with KEYED=1); for `consume`, four producers fill it first and CLIENTS consumers read it
# back, twice. Each measured run prints MB/s, the client's CPU (`/usr/bin/time`) and the CPU
# seconds each broker thread used during it (threads that used none are left out).
#
#   bench/scripts/cpu-by-shard.sh produce|consume PARTITIONS CLIENTS [BINARY]
set -eu
mode=$1
partitions=$2
clients=$3
binary=${4:-target/release/laminar}
port=19460
http=127.0.0.1:$((port + 1))
records=1048576
source "$(dirname "$0")/broker.sh"

work=$(mktemp -d)
trap 'umount "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/mnt"
truncate -s 8G "$work/image"
mkfs.ext4 -q -F "$work/image"
mount -o loop "$work/image" "$work/mnt"
data=$work/mnt/data
start_broker "$binary"

# CPU seconds of each broker thread, one "name ticks" line per thread.
thread_ticks() {
  for task in /proc/"$pid"/task/*; do
    echo "$(cat "$task/comm") $(awk '{ print $14 + $15 }' "$task/stat")"
  done
}

# Runs the client command given, then prints its figures and each thread's CPU during it.
measured() {
  thread_ticks >"$work/before"
  /usr/bin/time -f "client CPU %U s user, %S s system" "$@" 2>&1 | grep -o "[0-9.]* MB/sec\|^client CPU.*"
  thread_ticks >"$work/after"
  paste "$work/before" "$work/after" |
    awk -v hz="$(getconf CLK_TCK)" '$4 > $2 { printf "%s %.2f s\n", $1, ($4 - $2) / hz }'
}

keyed=""
[ "${KEYED:-0}" = 1 ] && keyed=--keyed
case $mode in
  produce)
    "$binary" topic create t --partitions "$partitions" --brokers 127.0.0.1:$port >/dev/null
    sleep 1
    measured "$binary" bench produce --brokers 127.0.0.1:$port --topic t --record-size 1024 \
      --num-records $records --producers "$clients" --batch-bytes 16384 $keyed --no-limits
    ;;
  consume)
    "$binary" bench produce --brokers 127.0.0.1:$port --topic t --partitions "$partitions" \
      --record-size 1024 --num-records $records --producers 4 --batch-bytes 16384 $keyed \
      --no-limits >/dev/null 2>&1
    sleep 2
    for _ in 1 2; do
      measured "$binary" bench consume --brokers 127.0.0.1:$port --topic t \
        --num-records $records --consumers "$clients" --no-limits
    done
    ;;
  *)
    echo "usage: $0 produce|consume PARTITIONS CLIENTS [BINARY]" >&2
    exit 2
    ;;
esac
stop_broker
