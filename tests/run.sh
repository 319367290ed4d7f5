#!/usr/bin/env bash
# The project's test command: sets up what the suites need (idempotently), builds the broker,
# runs every suite, and ends with one line "N passed, N failed" (tests, across all suites; a
# setup or build step that fails counts as one failed test). Exit status 0 only if nothing failed.
#
#   ./tests/run.sh                  everything
#   ./tests/run.sh rust python      only those suites (rust | python | node | librdkafka), after setup and build
#
# Environment: LAMINAR_BIN (broker binary; default target/debug/laminar), LAMINAR_TEST_GROUPS
# (1, the default here: also run the consumer-group / idempotence suites; 0 skips them),
# CARGO_TARGET_DIR (honoured).
set -uo pipefail
export LAMINAR_TEST_GROUPS="${LAMINAR_TEST_GROUPS:-1}"
# Root can mount the power-cut tests' FUSE file system: a failure to mount fails them there,
# rather than skipping them (tests/faultfs).
if [ "$(id -u)" = 0 ]; then export FAULTFS_TESTS_MUST_MOUNT="${FAULTFS_TESTS_MUST_MOUNT:-1}"; fi
# Likewise root can make the fault tests' network namespaces (tests/src/netns.rs).
if [ "$(id -u)" = 0 ]; then export LAMINAR_NETNS_TESTS_MUST_RUN="${LAMINAR_NETNS_TESTS_MUST_RUN:-1}"; fi

# A CI run builds once from a clean clone: incremental caches would only take disk.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"; fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TESTS="$ROOT/tests"
LOGS="$(mktemp -d -t laminar-test-logs.XXXXXX)"
PASSED=0
FAILED=0
FAILED_STEPS=()

say() { printf '\n==> %s\n' "$*"; }

count() { # count NAME PASSED FAILED
  PASSED=$((PASSED + $2))
  FAILED=$((FAILED + $3))
  if [ "$3" -gt 0 ]; then FAILED_STEPS+=("$1 ($3 failed)"); fi
  printf -- '--- %s: %d passed, %d failed\n' "$1" "$2" "$3"
}

step_failed() { # a step that produced no test counts: one failure
  count "$1" 0 1
}

# ---------------------------------------------------------------- setup (idempotent)
apt_missing=()
need_pkg() { dpkg -s "$1" >/dev/null 2>&1 || apt_missing+=("$1"); }

setup_system() {
  # librdkafka (rdkafka crate, bundled source build: make + a C compiler, zlib via pkg-config),
  # kcat for its suite, systemd for `systemd-analyze verify` of the units, Python venv support,
  # Node.js for kafkajs, headless Chromium and its WebDriver for the console.
  # chromium and chromium-driver: the console's browser test (tests/python/test_console.py).
  # iproute2 and nftables: the test network of tests/tests/faults_between_nodes.rs.
  for pkg in build-essential pkg-config zlib1g-dev kcat ca-certificates systemd chromium chromium-driver \
    iproute2 nftables; do
    need_pkg "$pkg"
  done
  command -v python3 >/dev/null || apt_missing+=(python3)
  if command -v python3 >/dev/null && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt_missing+=(python3-venv)
  fi
  command -v node >/dev/null || apt_missing+=(nodejs)
  command -v npm >/dev/null || apt_missing+=(npm)
  if [ "${#apt_missing[@]}" -gt 0 ]; then
    say "apt-get install ${apt_missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
      echo "need root to install: ${apt_missing[*]}" >&2
      return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" || return 1
  fi
}

# Reinstalls only when the pinned list changed (a hash stamp inside the venv / node_modules).
setup_python() {
  local venv="$TESTS/.venv" stamp want
  want="$(sha256sum "$TESTS/python/requirements.txt" | cut -d' ' -f1)"
  stamp="$venv/.requirements.sha256"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then return 0; fi
  say "python venv at tests/.venv"
  python3 -m venv "$venv" || return 1
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$TESTS/python/requirements.txt" || return 1
  echo "$want" >"$stamp"
}

setup_node() {
  local dir="$TESTS/node" stamp want
  want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  stamp="$dir/node_modules/.package-lock.sha256"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  say "npm ci in tests/node"
  # --ignore-scripts: every codec package used is pure JS / WebAssembly; nothing needs building.
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) || return 1
  echo "$want" >"$stamp"
}

# ---------------------------------------------------------------- static gates
# Formatting, clippy with the workspace lints (SAFETY comments, functions of at most 70 lines,
# no bare-bool parameter lists), and unsafe code only in the sys crate (every other crate root
# forbids it; sys/tests/unsafe_only_in_sys.rs scans the rest): each a counted check.
run_gates() {
  say "static gates: cargo fmt --check, cargo clippy -D warnings, unsafe only in sys/"
  if cargo fmt --all --check >"$LOGS/fmt.log" 2>&1; then
    count "gate: cargo fmt --check" 1 0
  else
    cat "$LOGS/fmt.log" | head -40
    count "gate: cargo fmt --check" 0 1
  fi
  if cargo clippy --color never --workspace --all-targets -- -D warnings >"$LOGS/clippy.log" 2>&1; then
    count "gate: cargo clippy" 1 0
  else
    grep -E '^(error|warning)' -A6 "$LOGS/clippy.log" | head -60
    count "gate: cargo clippy" 0 1
  fi
  if cargo test --color never -p laminar-sys --test unsafe_only_in_sys >"$LOGS/unsafe.log" 2>&1; then
    count "gate: unsafe only in sys/" 1 0
  else
    grep -E '^(error|unsafe code|crate roots)|\.rs: line ' "$LOGS/unsafe.log" | head -40
    count "gate: unsafe only in sys/" 0 1
  fi
}

# ---------------------------------------------------------------- suites
run_rust() {
  say "cargo test --workspace"
  local log="$LOGS/cargo-test.log"
  # --no-fail-fast: one failing test binary must not hide the results of the others.
  # Rust tests that drive Python clients (broker/tests/groups_clients.rs) find the venv's python3.
  PATH="$TESTS/.venv/bin:$PATH" cargo test --workspace --no-fail-fast --color never -- --test-threads=2 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  if [ "$status" -ne 0 ] && grep -q '^error: could not compile' "$log"; then
    # A compile error elsewhere must not hide the black-box results: count it, run ours alone.
    step_failed "rust: workspace does not compile for tests"
    say "cargo test -p laminar-tests (black-box suites alone)"
    PATH="$TESTS/.venv/bin:$PATH" cargo test -p laminar-tests --no-fail-fast --color never -- --test-threads=2 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
  fi
  local passed failed
  passed=$(grep -Eo 'test result: [A-Za-z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
  failed=$(grep -Eo '[0-9]+ failed;' "$log" | awk '{s+=$1} END {print s+0}')
  if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi # e.g. a compile error
  count "rust (cargo test)" "$passed" "$failed"
}

run_python() {
  say "pytest tests/python"
  local log="$LOGS/pytest.log"
  (cd "$TESTS" && .venv/bin/python -m pytest python -q -p no:cacheprovider) 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local summary passed failed
  summary="$(grep -E '[0-9]+ (passed|failed|errors?|skipped|deselected).* in [0-9.]+s' "$log" | tail -1)"
  passed=$(echo "$summary" | grep -Eo '[0-9]+ passed' | awk '{print $1+0}')
  failed=$(echo "$summary" | grep -Eo '[0-9]+ (failed|errors?)' | awk '{s+=$1} END {print s+0}')
  passed=${passed:-0}
  if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi # includes exit 5: no tests ran
  count "python (pytest)" "$passed" "$failed"
}

run_node() {
  say "node --test tests/node"
  local log="$LOGS/node.log"
  (cd "$TESTS/node" && node --test --test-concurrency=1) 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local passed failed
  passed=$(grep -E '^# pass [0-9]+' "$log" | tail -1 | awk '{print $3+0}')
  failed=$(grep -E '^# (fail|cancelled) [0-9]+' "$log" | awk '{s+=$3} END {print s+0}')
  passed=${passed:-0}
  if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  count "node (kafkajs)" "$passed" "$failed"
}

# librdkafka's own transaction tests (0103, 0129) built from the rdkafka-sys crate's bundled
# source (build-essential, zlib1g-dev, python3: already set up above) against a three-node
# cluster; the script bounds its run and says why when it skips (exit 77).
run_librdkafka() {
  say "librdkafka test suite: 0103 transactions, 0129 fetch of aborted messages"
  local log="$LOGS/librdkafka.log"
  "$TESTS/librdkafka/run.sh" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  if [ "$status" -eq 77 ]; then
    echo "librdkafka suite skipped: $(grep -m1 '^SKIPPED' "$log")"
    return 0
  fi
  local summary passed failed
  summary="$(grep -E '^librdkafka: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)"
  passed=$(echo "$summary" | awk '{print $2+0}')
  failed=$(echo "$summary" | awk '{print $4+0}')
  if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  count "librdkafka (0103, 0129)" "$passed" "$failed"
}

# ---------------------------------------------------------------- main
suites=("$@")
[ "${#suites[@]}" -eq 0 ] && suites=(rust python node librdkafka)
started=$SECONDS
# Tests that write data stop when their disk is nearly full (a build of every test takes several
# GB): the free space at both ends of the run says whether that was why one failed.
disk_free() {
  echo "disk free $1: $(df -h --output=avail "$ROOT" | tail -1 | tr -d ' ') (checkout)," \
    "$(df -h --output=avail "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ') (temporary files)"
}
disk_free "at the start"

setup_system || step_failed "setup: system packages"
wants() { local s; for s in "${suites[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
python_ready=1
node_ready=1
# The rust suite needs the venv too (confluent-kafka drives the consumer-group test).
if wants python || wants rust; then setup_python || { step_failed "setup: python venv"; python_ready=0; }; fi
if wants node; then setup_node || { step_failed "setup: npm ci"; node_ready=0; }; fi

# One build of every target with the features `cargo test --workspace` uses, so the test run
# rebuilds nothing; it also yields target/debug/laminar and target/debug/laminar-test-broker.
say "cargo build --workspace (lib, bins, tests, examples: what cargo test builds)"
if cargo build --color never --workspace --lib --bins --tests --examples; then
  built=1
elif cargo build --color never -p laminar --bin laminar && cargo build --color never -p laminar-tests --bins; then
  built=1 # some test target is broken (the rust suite counts it); the binaries are fine
else
  step_failed "cargo build"
  built=0
fi

if wants rust; then
  run_gates
  run_rust
fi
if [ "$built" -eq 1 ]; then
  if wants python && [ "$python_ready" -eq 1 ]; then run_python; fi
  if wants node && [ "$node_ready" -eq 1 ]; then run_node; fi
  if wants librdkafka; then run_librdkafka; fi
fi

say "summary after $((SECONDS - started)) s (logs in $LOGS)"
# Why each failing Rust test failed, here at the end: a failing test's own output can be long,
# and a log cut in the middle keeps only its head and the run's tail.
if [ -f "$LOGS/cargo-test.log" ] && grep -q '^test .* FAILED$' "$LOGS/cargo-test.log"; then
  echo "why the failing Rust tests failed (their first lines of FAILED:, Error: or a panic):"
  grep -E "^(FAILED: |Error: |thread '.*' panicked)" -A4 "$LOGS/cargo-test.log" | cut -c1-400 | head -80
fi
disk_free "at the end"
for step in "${FAILED_STEPS[@]+"${FAILED_STEPS[@]}"}"; do echo "FAILED: $step"; done
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
