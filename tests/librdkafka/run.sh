#!/usr/bin/env bash
# librdkafka's own transaction tests against real Laminar brokers: 0103 (transactions: misuse,
# commit/abort with and without compression, consume-transform-produce, fencing, KIP-360,
# empty transactions, read_committed high watermark, abort markers) and 0129 (a fetch of
# only aborted messages). librdkafka's source is the one the rdkafka-sys crate bundles (the
# tests crate's dependency, pinned by Cargo.lock): its crate holds the full tree, tests/
# included, so nothing beyond crates.io is needed.
#
#   tests/librdkafka/run.sh                 build (once) and run 0103 and 0129
#   LIBRDKAFKA_TESTS=0129 tests/librdkafka/run.sh
#
# 0103 creates its topics with replication factor 3, as librdkafka's CI cluster has three
# brokers: the script starts a three-node Laminar cluster (broker and controller in each
# process) on free local ports, with data in a temporary dir.
#
# Environment: LAMINAR_BIN (default target/debug/laminar), CARGO_TARGET_DIR (the build goes to
# its librdkafka-<version>/), LIBRDKAFKA_TESTS (default 0103,0129), LIBRDKAFKA_BROKER_VERSION
# (the Kafka version the test runner assumes for version-gated subtests; default 3.7.0),
# LIBRDKAFKA_TIMEOUT (seconds for the test run; default 240), LIBRDKAFKA_DEBUG (librdkafka
# `debug=` contexts, e.g. eos,protocol,msg).
# Needs a C and C++ compiler, make, zlib headers and python3 (build-essential zlib1g-dev).
# Exit status: 0 all passed, 1 a failure, 77 skipped (what is missing is printed).
# Last line: "librdkafka: N passed, M failed" (subtests).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
LAMINAR_BIN="${LAMINAR_BIN:-$TARGET/debug/laminar}"
case "$LAMINAR_BIN" in /*) ;; *) LAMINAR_BIN="$ROOT/$LAMINAR_BIN" ;; esac
TESTS_TO_RUN="${LIBRDKAFKA_TESTS:-0103,0129}"
BROKER_VERSION="${LIBRDKAFKA_BROKER_VERSION:-3.7.0}"
RUN_TIMEOUT="${LIBRDKAFKA_TIMEOUT:-240}"

say() { printf '==> %s\n' "$*"; }
skip() {
  echo "SKIPPED librdkafka tests: $*"
  echo "librdkafka: 0 passed, 0 failed (skipped)"
  exit 77
}
fail() {
  echo "librdkafka: $*" >&2
  echo "librdkafka: 0 passed, 1 failed"
  exit 1
}

for tool in cc c++ make python3 tar timeout; do
  command -v "$tool" >/dev/null || skip "'$tool' not found (Debian: build-essential, python3)"
done
[ -e /usr/include/zlib.h ] || skip "zlib headers not found (Debian: zlib1g-dev)"
[ -x "$LAMINAR_BIN" ] || fail "no broker binary at $LAMINAR_BIN (cargo build -p laminar)"

# ---------------------------------------------------------------- the source: rdkafka-sys's crate
version="$(awk '/^name = "rdkafka-sys"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock")"
[ -n "$version" ] || fail "rdkafka-sys not in Cargo.lock"
CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
find_source() {
  local dir
  for dir in "$CARGO_HOME"/registry/src/*/"rdkafka-sys-$version"/librdkafka; do
    [ -f "$dir/tests/0103-transactions.c" ] && { echo "$dir"; return 0; }
  done
  return 1
}
unpacked=""
if ! source_dir="$(find_source)"; then
  # Not unpacked yet (cargo unpacks a crate when it builds it): the downloaded .crate will do.
  crate=""
  for c in "$CARGO_HOME"/registry/cache/*/"rdkafka-sys-$version.crate"; do [ -f "$c" ] && crate="$c"; done
  if [ -z "$crate" ]; then
    (cd "$ROOT" && timeout 300 cargo fetch --locked >/dev/null 2>&1)
    for c in "$CARGO_HOME"/registry/cache/*/"rdkafka-sys-$version.crate"; do [ -f "$c" ] && crate="$c"; done
  fi
  [ -n "$crate" ] || skip "rdkafka-sys $version is neither unpacked nor downloaded under $CARGO_HOME/registry"
  unpacked="$(mktemp -d -t rdkafka-sys.XXXXXX)"
  tar -xzf "$crate" -C "$unpacked" || fail "cannot unpack $crate"
  source_dir="$unpacked/rdkafka-sys-$version/librdkafka"
fi
librdkafka_version="${version#*+}"
say "librdkafka $librdkafka_version (rdkafka-sys $version): $source_dir"

# ---------------------------------------------------------------- build (once per version)
BUILD="$TARGET/librdkafka-$librdkafka_version"
# Only what the two tests need: no TLS, SASL, zstd or HTTP client; builtin lz4 (0103 uses lz4).
CONFIGURE_FLAGS="--disable-ssl --disable-gssapi --disable-curl --disable-zstd --disable-lz4-ext --disable-optimization"
stamp_want="$version $CONFIGURE_FLAGS"
build() {
  rm -rf "$BUILD"
  mkdir -p "$BUILD" && cp -R "$source_dir/." "$BUILD/" || return 1
  local log="$BUILD/build.log"
  say "building librdkafka and its test runner in $BUILD (about 1.5 min on 2 cores)"
  (
    cd "$BUILD" &&
      ./configure $CONFIGURE_FLAGS &&
      make -j2 -C src lib &&
      make -j2 -C src-cpp lib &&
      make -j2 -C tests test-runner
  ) >"$log" 2>&1 || {
    tail -40 "$log"
    return 1
  }
  echo "$stamp_want" >"$BUILD/.laminar-build-stamp"
}
if [ ! -x "$BUILD/tests/test-runner" ] || [ "$(cat "$BUILD/.laminar-build-stamp" 2>/dev/null)" != "$stamp_want" ]; then
  started=$SECONDS
  build || fail "build failed (log: $BUILD/build.log)"
  say "built in $((SECONDS - started)) s"
fi
[ -n "$unpacked" ] && rm -rf "$unpacked"

# ---------------------------------------------------------------- a three-node cluster
WORK="$(mktemp -d -t laminar-librdkafka.XXXXXX)"
pids=()
stop_brokers() {
  local pid
  for pid in "${pids[@]+"${pids[@]}"}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]+"${pids[@]}"}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  pids=()
}
cleanup() {
  stop_brokers
  if [ "${keep_work:-0}" = 1 ]; then echo "broker logs and test output kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Nine free ports: Kafka, controller and admin HTTP listeners of three nodes.
read -r -a ports < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(9)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()
')
[ "${#ports[@]}" -eq 9 ] || fail "no free ports"
voters="1@127.0.0.1:${ports[3]},2@127.0.0.1:${ports[4]},3@127.0.0.1:${ports[5]}"
bootstrap="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
for i in 0 1 2; do
  node=$((i + 1))
  mkdir -p "$WORK/node$node"
  "$LAMINAR_BIN" broker \
    --override process.roles=broker,controller \
    --override "node.id=$node" \
    --override "controller.quorum.voters=$voters" \
    --override "listeners=PLAINTEXT://127.0.0.1:${ports[$i]},CONTROLLER://127.0.0.1:${ports[$((i + 3))]}" \
    --override "log.dirs=$WORK/node$node/data" \
    --override "laminar.http.listen=127.0.0.1:${ports[$((i + 6))]}" \
    >"$WORK/node$node/stdout.log" 2>"$WORK/node$node/stderr.log" &
  pids+=($!)
done
say "three brokers on $bootstrap (data and logs in $WORK)"
ready=0
for _ in $(seq 300); do # at most 60 s
  ready=0
  for node in 1 2 3; do grep -q 'laminar broker started' "$WORK/node$node/stderr.log" && ready=$((ready + 1)); done
  [ "$ready" -eq 3 ] && break
  for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || break 2; done
  sleep 0.2
done
if [ "$ready" -ne 3 ]; then
  keep_work=1
  for node in 1 2 3; do echo "--- node $node stderr"; tail -20 "$WORK/node$node/stderr.log"; done
  fail "the cluster did not start"
fi

# ---------------------------------------------------------------- the tests
conf="$WORK/test.conf"
echo "bootstrap.servers=$bootstrap" >"$conf"
[ -n "${LIBRDKAFKA_DEBUG:-}" ] && echo "debug=$LIBRDKAFKA_DEBUG" >>"$conf"
log="$WORK/test-runner.log"
say "test-runner: TESTS=$TESTS_TO_RUN TEST_KAFKA_VERSION=$BROKER_VERSION (at most $RUN_TIMEOUT s)"
started=$SECONDS
(
  cd "$BUILD/tests" &&
    LD_LIBRARY_PATH="../src:../src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      RDKAFKA_TEST_CONF="$conf" TESTS="$TESTS_TO_RUN" TEST_KAFKA_VERSION="$BROKER_VERSION" \
      timeout --kill-after=10 "$RUN_TIMEOUT" ./test-runner -p1
) >"$log" 2>&1
status=$?
elapsed=$((SECONDS - started))

# Each subtest's verdict, then each test's, without the colours.
plain() { sed -e 's/\x1b\[[0-9;]*m//g' "$log"; }
plain | grep -E '\[ [a-z_0-9]+:[0-9]+.*: (PASS|SKIP)|^### Test .* failed|^Test assertion failed|Test [0-9a-z_]+ (PASSED|FAILED)' |
  sed -e 's/^.*\] *\[/[/'
# Passes: each subtest that passed, and each passed test that has no subtests (0129).
passed=$(plain | awk '
  match($0, /^\[[0-9a-z_]+ +\//) { name = substr($0, 2, RLENGTH - 1); sub(/ +\/$/, "", name) }
  /\[ [a-z_0-9]+:[0-9]+.*: PASS \(/ { subtests[name]++; n++ }
  match($0, /Test [0-9a-z_]+ PASSED/) { whole[substr($0, RSTART + 5, RLENGTH - 12)] = 1 }
  END { for (t in whole) if (!(t in subtests)) n++; print n + 0 }')
failed=$(plain | grep -E '^### Test ".*" failed' | grep -vc '^### Test "<MAIN>"')
[ "$status" -eq 124 ] || [ "$status" -eq 137 ] && echo "test-runner timed out after $RUN_TIMEOUT s"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ "$failed" -gt 0 ]; then
  keep_work=1
  # A failed subtest ends its test: the test's later subtests did not run.
  echo "--- what led to each failure ($log)"
  plain | grep -vE 'test\(s\) running' | grep -B30 -A2 -E '^### Test "[^<]' | cut -c1-400 | head -150
  for node in 1 2 3; do
    echo "--- node $node: warnings and errors"
    grep -E ' (WARN|ERROR) ' "$WORK/node$node/stderr.log" | tail -10
  done
fi
say "test-runner exit $status after $elapsed s"
echo "librdkafka: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
