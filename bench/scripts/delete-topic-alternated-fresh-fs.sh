#!/usr/bin/env bash
# Two builds alternated (A, B, A, B), each run on a fresh ext4 file system (a loop-mounted image):
# a topic of N partitions, 4N keyed 100-byte records (most partitions take some), 15 s for the
# checkpoints, then `laminar topic delete` timed (wall) with the broker's CPU over it. Needs root.
#
#   bench/scripts/delete-topic-alternated-fresh-fs.sh N A_BINARY B_BINARY
set -eu
N=$1
binaries=("$2" "$3")
work=$(mktemp -d); mkdir $work/mnt; port=19600
for which in 0 1 0 1; do
  bin=${binaries[$which]}
  truncate -s 16G $work/image; mkfs.ext4 -q -F $work/image; mount -o loop $work/image $work/mnt
  $bin broker --override log.dirs=$work/mnt/data --override listeners=PLAINTEXT://127.0.0.1:$port \
    --override laminar.http.listen=127.0.0.1:$((port+1)) > $work/broker.log 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
  $bin topic create t --partitions $N --brokers 127.0.0.1:$port >/dev/null
  $bin bench produce --brokers 127.0.0.1:$port --topic t --record-size 100 --num-records $((4*N)) --producers 4 --keyed --no-limits >/dev/null 2>&1
  sleep 15
  dirs=$(ls $work/mnt/data | wc -l)
  cpu0=$(awk '{print $14 + $15}' /proc/$pid/stat); t0=$(date +%s.%N)
  $bin topic delete t --brokers 127.0.0.1:$port >/dev/null
  t1=$(date +%s.%N); cpu1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  left=$(ls $work/mnt/data | wc -l)
  echo "$( [ $which = 0 ] && echo A || echo B ): $N partitions, $dirs entries before, $left after: delete $(echo "$t1 - $t0" | bc) s wall, broker CPU $(echo "($cpu1 - $cpu0)/100" | bc -l | cut -c1-5) s"
  kill $pid; wait $pid 2>/dev/null || true
  umount $work/mnt; rm -f $work/image
done
rm -rf $work
