#!/usr/bin/env python3
"""The long run by hand of "no acknowledged record is ever lost": a fresh three-node cluster, a
topic with replication factor 3 and min.insync.replicas=2, an idempotent acks=all producer, and
hundreds of partition leaders killed with -9 and restarted (--mode kill) or frozen with SIGSTOP
for a while and resumed (--mode stop). At the end: every acknowledged record read back exactly
once and in order, and every replica's segments byte for byte the same. Judged by
replication_check.py, the same code as test_replication.py.

    tests/.venv/bin/python tests/python/kill_loop.py --kills 300 --mode kill
    tests/.venv/bin/python tests/python/kill_loop.py --mode stop --duration 1800 --partitions 6

Needs target/debug/laminar and laminar-test-broker (`cargo build --workspace --bins`). Exits
0 when every check held, 1 otherwise; the last line is the counts.
"""

import argparse
import shutil
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from laminar_broker import ClusterProcess  # noqa: E402
from replication_check import LoopOptions, run_kill_loop  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=200, help="leader failures to cause (default 200)")
    parser.add_argument("--duration", type=float, default=3600,
                        help="stop causing failures after this many seconds (default 3600)")
    parser.add_argument("--mode", choices=("kill", "stop"), default="kill",
                        help="kill: kill -9 then restart; stop: SIGSTOP, hold, SIGCONT (default kill)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=int, default=500, help="records per second (default 500)")
    parser.add_argument("--min-insync", type=int, default=2, help="the topic's min.insync.replicas")
    parser.add_argument("--pause-min", type=float, default=1.0, help="--mode stop: shortest hold, s")
    parser.add_argument("--pause-max", type=float, default=8.0, help="--mode stop: longest hold, s")
    parser.add_argument("--session-timeout-ms", type=int, default=3000,
                        help="broker.session.timeout.ms: how long a dead node keeps its leaderships")
    parser.add_argument("--lag-time-ms", type=int, default=3000, help="replica.lag.time.max.ms")
    parser.add_argument("--seed", type=int, default=None, help="victim and hold choices (default: random)")
    parser.add_argument("--keep-logs", default=None, metavar="DIR",
                        help="on a failure, copy every broker's stderr logs into DIR")
    parser.add_argument("--avoid-controller", action="store_true",
                        help="never fail the active controller while another node leads a partition")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="another broker setting for every node (repeatable)")
    return parser.parse_args()


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    overrides = {"min.insync.replicas": str(args.min_insync), "default.replication.factor": "3",
                 "replica.lag.time.max.ms": str(args.lag_time_ms), "leader.imbalance.check.interval.seconds": "2"}
    overrides.update(dict(pair.split("=", 1) for pair in args.override))
    options = LoopOptions(kills=args.kills, duration_s=args.duration, mode=args.mode, partitions=args.partitions,
                          min_insync_replicas=args.min_insync, rate=args.rate,
                          pause_s=(args.pause_min, args.pause_max), seed=seed,
                          avoid_controller=args.avoid_controller)
    topic = f"kill-loop-{uuid.uuid4().hex[:8]}"
    print(f"seed {seed}, topic {topic}, overrides {overrides}", flush=True)
    cluster = ClusterProcess(3, overrides=overrides, session_timeout_ms=args.session_timeout_ms)
    try:
        print(f"cluster {cluster.bootstrap}; data dirs "
              f"{ {n: str(cluster.data_dir(n)) for n in cluster.node_ids} }", flush=True)
        result = run_kill_loop(cluster, topic, options, say=lambda line: print(line, flush=True))
        print(result.report())
        if not result.ok():
            print("stderr logs kept until this prompt ends:", flush=True)
            for node in cluster.node_ids:
                print(f"  node {node}: {[str(p) for p in cluster.stderr_logs(node)]}")
                if args.keep_logs:
                    kept = Path(args.keep_logs) / f"node-{node}"
                    kept.mkdir(parents=True, exist_ok=True)
                    for log in cluster.stderr_logs(node):
                        shutil.copy(log, kept / Path(log).name)
            if sys.stdin.isatty():
                input("press Enter to stop the cluster (its data dirs are then removed) ")
    finally:
        cluster.stop()
    print(result.report().split("\n")[0] + f" ok={'yes' if result.ok() else 'no'}")
    return 0 if result.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
