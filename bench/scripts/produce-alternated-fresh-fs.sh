#!/usr/bin/env bash
# Two brokers (two builds, or one build with different --override settings) alternated, each run
# on a fresh ext4 file system (a loop-mounted image made and unmounted per run), so that no run
# pays for the last one's deleted inodes or page cache (docs/decisions/0018, "Measured"). Each
# run: a fresh broker, the topic created, then the broker's CPU from there to the end of a
# produce of 1 GiB of 1 KiB records from four producers in 16 KiB batches. Needs root (mount).
#
#   bench/scripts/produce-alternated-fresh-fs.sh ROUNDS PARTITIONS keyed|unkeyed "A" "B"
#
# A and B are broker commands without `broker`: a binary and its overrides, as in
#   "target/release/laminar --override laminar.storage.mapped_appends=false" "target/release/laminar"
# The first binary of A drives the topic creation and the produce. Prints MB/s and broker CPU
# seconds per run. With WARM=1, every partition first takes three keyed records (so each is
# opened, as `laminar bench scale` warms its topics) and the CPU is read after that. ACKS (default
# 1) and RECORDS (default 1000000) change the measured produce; each line also says how many
# bytes the file system's device was written during it.
set -eu
acks=${ACKS:-1}
records=${RECORDS:-1000000}
rounds=$1
partitions=$2
mode=$3
commands=("$4" "$5")
client=${4%% *}
keyed=""
[ "$mode" = keyed ] && keyed=--keyed
work=$(mktemp -d)
trap 'umount "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/mnt"
port=19400
for round in $(seq 1 "$rounds"); do
  for which in 0 1; do
    truncate -s 8G "$work/image"
    mkfs.ext4 -q -F "$work/image"
    mount -o loop "$work/image" "$work/mnt"
    read -r -a broker <<<"${commands[$which]}"
    "${broker[0]}" broker "${broker[@]:1}" --override log.dirs="$work/mnt/data" \
      --override listeners=PLAINTEXT://127.0.0.1:$port \
      --override laminar.http.listen=127.0.0.1:$((port + 1)) >"$work/broker.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    "$client" topic create t --partitions "$partitions" --brokers 127.0.0.1:$port >/dev/null
    if [ "${WARM:-0}" = 1 ]; then
      "$client" bench produce --brokers 127.0.0.1:$port --topic t --record-size 1024 \
        --num-records $((partitions * 3)) --producers 4 --batch-bytes 16384 --keyed --no-limits >/dev/null 2>&1
    fi
    sleep 1
    sync
    device=$(basename "$(findmnt -n -o SOURCE "$work/mnt")")
    sectors_before=$(awk '{print $7}' "/sys/block/$device/stat")
    cpu_before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    "$client" bench produce --brokers 127.0.0.1:$port --topic t --record-size 1024 \
      --num-records "$records" --producers 4 --batch-bytes 16384 $keyed --acks "$acks" --no-limits \
      --json "$work/produce.json" >/dev/null 2>&1
    cpu=$(awk -v before="$cpu_before" '{printf "%.2f", ($14 + $15 - before) / 100}' "/proc/$pid/stat")
    written=$(awk -v before="$sectors_before" '{printf "%.0f", ($7 - before) * 512 / 1048576}' "/sys/block/$device/stat")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    mb=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['mb_per_sec'], 1))" "$work/produce.json")
    echo "round $round $( [ $which = 0 ] && echo A || echo B ): $mode $partitions partitions: $mb MB/s, broker CPU ${cpu} s, device written ${written} MiB"
    umount "$work/mnt"
    rm -f "$work/image" "$work/produce.json"
  done
done
