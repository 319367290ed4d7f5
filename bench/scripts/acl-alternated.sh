#!/usr/bin/env bash
# What ACLs cost, side by side: two brokers of BINARY, one without an authorizer and one with
# `authorizer.class.name=laminar` holding ACLS_OTHER prefixed ACLs of other principals plus the
# grants the benchmark's own (anonymous, PLAINTEXT) principal needs, so every request walks the
# literal, wildcard and prefixed ACLs of its topic. Then, ROUNDS times, alternating the two,
# `laminar bench produce` (batches of BATCH_BYTES: small ones make many requests, each checked)
# and `consume` of RECORDS records of RECORD_SIZE bytes on a topic of their own. Prints each
# run's summary line; compare within a run (this VM is noisy).
#
#   bench/scripts/acl-alternated.sh BINARY [ROUNDS] [RECORDS] [RECORD_SIZE] [ACLS_OTHER] [BATCH_BYTES]
set -u
binary=$1
rounds=${2:-3}
records=${3:-500000}
record_size=${4:-100}
acls_other=${5:-200}
batch_bytes=${6:-16384}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

start() { # start NAME PORT [override...]
  local name=$1 port=$2
  shift 2
  "$binary" broker --override log.dirs="$work/$name" --override listeners=PLAINTEXT://127.0.0.1:"$port" \
    --override laminar.http.listen=127.0.0.1:$((port + 9)) "$@" >>"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.2; done
}

off=19500
on=19520
start off $off
# The ACLs are made while the anonymous principal is a super user, then the broker restarts
# without super users: what it reads from its `acls` file is all it has.
start on $on --override authorizer.class.name=laminar --override super.users=User:ANONYMOUS
acl() { "$binary" acl create --brokers 127.0.0.1:$on "$@" >/dev/null; }
for i in $(seq 1 "$acls_other"); do
  acl --allow-principal "User:user-$i" --operation read,write --topic "team-$i-" --prefixed
done
acl --allow-principal User:ANONYMOUS --operation all --topic '*'
acl --allow-principal User:ANONYMOUS --operation all --group '*'
acl --allow-principal User:ANONYMOUS --operation idempotent_write,create --cluster
kill "${pids[1]}"
wait "${pids[1]}" 2>/dev/null
start on $on --override authorizer.class.name=laminar

for round in $(seq 1 "$rounds"); do
  for side in off on; do
    port=$off
    [ "$side" = on ] && port=$on
    topic="acl-$side-$round"
    produced=$("$binary" bench produce --brokers 127.0.0.1:$port --topic "$topic" --partitions 1 \
      --num-records "$records" --record-size "$record_size" --batch-bytes "$batch_bytes" --acks 1 --no-limits 2>&1 | grep -E 'MB/s|Error' | head -1)
    consumed=$("$binary" bench consume --brokers 127.0.0.1:$port --topic "$topic" --partitions 1 \
      --num-records "$records" --no-limits 2>&1 | grep -E 'MB/s|Error' | head -1)
    echo "round $round ACLs $side produce: $produced"
    echo "round $round ACLs $side consume: $consumed"
  done
done
