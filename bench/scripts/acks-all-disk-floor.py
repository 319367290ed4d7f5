#!/usr/bin/env python3
"""The disk's own floor under acks=all latency, without a broker: O_DIRECT appends of 256 KiB
paced at RATE MB/s, round-robin over FILES growing files (one per partition), while each file
has a thread of its own fdatasyncing back to back (a partition's group commit). A write's
latency runs from its start to the end of the first fdatasync of its file begun after it
completed. Compare with `bench/scripts/acks-all-latency-sources.sh` at the same rate.

    bench/scripts/acks-all-disk-floor.py /work/floor 350 8 4    # PATH_PREFIX RATE_MB SECONDS FILES
"""
import mmap
import os
import sys
import threading
import time

prefix, rate_mb, seconds, files = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
size = 256 * 1024
buffer = mmap.mmap(-1, size)  # page-aligned, as O_DIRECT needs
buffer.write(os.urandom(size))
fds = [os.open(f"{prefix}.{i}", os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_DIRECT, 0o644) for i in range(files)]
total = int(rate_mb * 1e6 * seconds) // size * size
writes, syncs, stopping = [], [[] for _ in fds], threading.Event()


def group_commit(i):
    while not stopping.is_set():
        started = time.monotonic()
        os.fdatasync(fds[i])
        syncs[i].append((started, time.monotonic()))


threads = [threading.Thread(target=group_commit, args=(i,)) for i in range(files)]
for t in threads:
    t.start()
interval, started, offsets, n = size / (rate_mb * 1e6), time.monotonic(), [0] * files, 0
while n * size < total:
    delay = started + n * interval - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    i = n % files
    began = time.monotonic()
    os.pwrite(fds[i], buffer, offsets[i])
    writes.append((i, began, time.monotonic()))
    offsets[i] += size
    n += 1
time.sleep(0.1)
stopping.set()
for t in threads:
    t.join()
elapsed = time.monotonic() - started
latencies = sorted(next(end for begun, end in syncs[i] if begun >= done) - began
                   for i, began, done in writes if any(begun >= done for begun, _ in syncs[i]))
q = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3
print(f"{files} files, {total / elapsed / 1e6:.0f} MB/s: write to durable p50 {q(.5):.2f} ms, "
      f"p99 {q(.99):.2f} ms, p99.9 {q(.999):.2f} ms ({len(latencies)} writes)")
for i, fd in enumerate(fds):
    os.close(fd)
    os.unlink(f"{prefix}.{i}")
