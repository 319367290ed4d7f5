# Shared by the scripts here (`source "$(dirname "$0")/broker.sh"`): a broker on loopback for a
# side-by-side run. Callers set `data`, `port` and `http` first.

# Starts BINARY's broker on $data and waits for its Kafka port; sets `pid`.
start_broker() {
  "$1" broker --override log.dirs="$data" --override listeners=PLAINTEXT://127.0.0.1:$port \
    --override laminar.http.listen=$http >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
}

# Stops it with SIGTERM (a clean shutdown) and waits.
stop_broker() {
  kill "$pid"
  wait "$pid" 2>/dev/null
}

# CPU seconds (user and system, every thread) the broker used so far.
broker_cpu_s() {
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$pid/stat"
}
