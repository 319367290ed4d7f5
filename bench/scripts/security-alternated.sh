#!/usr/bin/env bash
# What TLS and SASL cost, side by side on one broker: BINARY's broker listens on PLAINTEXT,
# SASL_PLAINTEXT (SCRAM-SHA-512), SSL and SASL_SSL (SCRAM-SHA-512), certificates made by
# CERTS_TOOL (target/debug/laminar-test-certs); then, ROUNDS times, for each listener in turn,
# `laminar bench produce` and `consume` of RECORDS records of RECORD_SIZE bytes on a topic of
# its own. Prints each run's summary line; compare within a run (this VM is noisy).
#
#   bench/scripts/security-alternated.sh BINARY CERTS_TOOL [ROUNDS] [RECORDS] [RECORD_SIZE]
set -u
binary=$1
certs_tool=$2
rounds=${3:-3}
records=${4:-200000}
record_size=${5:-1024}
work=$(mktemp -d)
"$certs_tool" "$work/certs" >/dev/null
data="$work/data"
port=19400
listeners="PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$((port + 1)),SSL://127.0.0.1:$((port + 2)),SASL_SSL://127.0.0.1:$((port + 3))"
"$binary" broker --override log.dirs="$data" --override listeners="$listeners" \
  --override laminar.http.listen=127.0.0.1:$((port + 9)) \
  --override ssl.keystore.location="$work/certs/server.pem" \
  --override sasl.enabled.mechanisms=SCRAM-SHA-512 >"$work/broker.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
LAMINAR_USER_PASSWORD=bench-secret "$binary" user create bench --brokers 127.0.0.1:$port >/dev/null
export LAMINAR_SASL_PASSWORD=bench-secret
security_args() {
  case $1 in
    PLAINTEXT) echo "--brokers 127.0.0.1:$port" ;;
    SASL_PLAINTEXT) echo "--brokers 127.0.0.1:$((port + 1)) --security-protocol SASL_PLAINTEXT --sasl-username bench" ;;
    SSL) echo "--brokers 127.0.0.1:$((port + 2)) --security-protocol SSL --ssl-ca-location $work/certs/ca.pem" ;;
    SASL_SSL) echo "--brokers 127.0.0.1:$((port + 3)) --security-protocol SASL_SSL --sasl-username bench --ssl-ca-location $work/certs/ca.pem" ;;
  esac
}
for round in $(seq 1 "$rounds"); do
  for protocol in PLAINTEXT SASL_PLAINTEXT SSL SASL_SSL; do
    topic="security-$protocol-$round"
    # shellcheck disable=SC2046
    produced=$("$binary" bench produce $(security_args $protocol) --topic "$topic" --partitions 1 \
      --num-records "$records" --record-size "$record_size" --acks 1 --no-limits 2>&1 | grep -E 'MB/s|Error' | head -1)
    # shellcheck disable=SC2046
    consumed=$("$binary" bench consume $(security_args $protocol) --topic "$topic" --partitions 1 \
      --num-records "$records" --no-limits 2>&1 | grep -E 'MB/s|Error' | head -1)
    echo "round $round $protocol produce: $produced"
    echo "round $round $protocol consume: $consumed"
  done
done
