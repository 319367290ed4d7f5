"""What "no acknowledged record is ever lost" means, checked against real brokers: shared by
test_replication.py (CI) and kill_loop.py (the long run by hand), so both judge the same way.

- `NumberedProducer` produces records numbered 0, 1, 2, ... (record n to partition n % P) with
  confluent-kafka from a thread of its own and keeps every delivery report: the acknowledged
  (partition, offset, n), the failed ones with their error, fatal errors.
- `read_back` reads every partition from the earliest offset to its high watermark with a fresh
  consumer; `check` compares that with the acknowledgements: every acknowledged record present
  exactly once, at its acknowledged offset, in order per partition.
- `wait_replicas_identical` compares the segment files (`<data dir>/<topic>-<p>/*.log`) of every
  replica byte for byte.
- `run_kill_loop` puts them together around a loop that kills (or SIGSTOPs) partition leaders.
"""

import random
import struct
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# librdkafka's own log: connection failures to the brokers the loop kills are expected.
RDKAFKA_LOG_LEVEL = 2
KEY_PREFIX = b"n:"


class CheckFailure(AssertionError):
    pass


def client_config(bootstrap, **extra):
    config = {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "log_level": RDKAFKA_LOG_LEVEL}
    config.update(extra)
    return config


def wait_until(what, timeout_s, check, interval_s=0.1):
    """Polls `check()` until it returns something truthy (an exception counts as not yet);
    returns (value, seconds waited). Fails naming `what` and the last value or error seen."""
    started = time.monotonic()
    last = None
    while True:
        try:
            last = check()
            if last:
                return last, time.monotonic() - started
        except Exception as error:  # noqa: BLE001 - any failure is "not yet" until the deadline
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() - started > timeout_s:
            raise CheckFailure(f"{what}: not within {timeout_s:.0f} s (last seen: {last!r})")
        time.sleep(interval_s)


# ----------------------------------------------------------------------------- topic and metadata

def create_topic(admin, topic, partitions, replication_factor, config=None, timeout_s=30):
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor, config=config or {})],
                                  operation_timeout=timeout_s)
    futures[topic].result(timeout_s)


def partition_states(admin, topic, timeout_s=5):
    """{partition: (leader, sorted replicas, sorted ISR)} from one broker's Metadata."""
    metadata = admin.list_topics(topic, timeout=timeout_s)
    described = metadata.topics.get(topic)
    if described is None or described.error is not None:
        raise CheckFailure(f"metadata of {topic}: {described.error if described else 'missing'}")
    return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in described.partitions.values()}


def all_in_sync(states, partitions, nodes):
    """True when every partition has a live leader and every replica of `nodes` in its ISR."""
    return (states is not None and len(states) == partitions
            and all(leader in nodes and isr == sorted(nodes) for leader, _, isr in states.values()))


def wait_all_in_sync(admin, topic, partitions, nodes, timeout_s):
    """Waits until every partition has a leader and its ISR holds all of `nodes`; returns the
    seconds it took. Fails with the last metadata seen."""
    _, took = wait_until(f"{topic}: every partition led, ISR = {sorted(nodes)}", timeout_s,
                         lambda: all_in_sync(partition_states(admin, topic), partitions, nodes))
    return took


# ----------------------------------------------------------------------------- producing

def record_key(seq):
    return KEY_PREFIX + str(seq).encode()


def record_value(seq, partition):
    """The value record `seq` carries: its number, partition and a filler of varying length,
    so a record read back can be checked to be the one written, whole."""
    return f"{seq}/{partition}/".encode() + bytes((seq + i) % 251 for i in range(seq % 97))


class NumberedProducer:
    """Produces record n to partition n % partitions, at about `rate` records per second, from
    a thread of its own, with `config` over the defaults (acks=all, idempotence on, retries
    until `message.timeout.ms`). The producer object is used by that thread only, until stop()
    joins it and flushes."""

    def __init__(self, bootstrap, topic, partitions, rate=500, config=None):
        defaults = {"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                    "message.timeout.ms": 120_000, "request.timeout.ms": 10_000}
        defaults.update(config or {})
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self._producer = Producer(client_config(bootstrap, error_cb=self._on_error, **defaults))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.acked = defaultdict(list)  # partition -> [(offset, seq)] in delivery order
        self.acked_count = 0
        self.failed = {}  # seq -> KafkaError
        self.fatal = []  # str of fatal errors (the idempotent producer gave up)
        self.client_errors = Counter()  # non-fatal error_cb names (e.g. _TRANSPORT, _ALL_BROKERS_DOWN)
        self.produced = 0
        self.unflushed = None
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _on_error(self, error):
        with self._lock:
            if error.fatal():
                self.fatal.append(str(error))
            else:
                self.client_errors[error.name()] += 1

    def _on_delivery(self, error, message):
        seq = int(message.key()[len(KEY_PREFIX):])
        with self._lock:
            if error is None:
                self.acked[message.partition()].append((message.offset(), seq))
                self.acked_count += 1
            else:
                self.failed[seq] = error

    def _run(self):
        try:
            self._produce_until_stopped()
        except KafkaException as error:  # a fatal error (error_cb has it too): the producer is done
            with self._lock:
                self.fatal.append(f"the producer raised {error}")

    def _produce_until_stopped(self):
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            seq = self.produced
            partition = seq % self.partitions
            try:
                self._producer.produce(self.topic, key=record_key(seq), value=record_value(seq, partition),
                                       partition=partition, on_delivery=self._on_delivery)
            except BufferError:  # the local queue is full (leaders away): serve callbacks, retry
                self._producer.poll(0.05)
                continue
            self.produced += 1
            next_at += interval
            self._producer.poll(max(0.0, next_at - time.monotonic()))
            if time.monotonic() - next_at > 1.0:  # fell behind (a stall): do not burst afterwards
                next_at = time.monotonic()

    def acked_total(self, partition=None):
        """Acknowledged records in all, or on `partition`."""
        with self._lock:
            return self.acked_count if partition is None else len(self.acked[partition])

    def wait_acked(self, more_than, timeout_s, what, partition=None):
        """Waits until more than `more_than` records are acknowledged in all (or on `partition`)."""
        took = wait_until(what, timeout_s, lambda: self.fatal or self.acked_total(partition) > more_than)[1]
        if self.fatal:
            raise CheckFailure(f"{what}: the idempotent producer failed fatally: {self.fatal}")
        return took

    def stop(self, flush_timeout_s=90):
        """Stops producing, delivers what is queued (bounded); returns how many records were
        still undelivered at the bound."""
        self._stop.set()
        self._thread.join(timeout=30)
        try:
            self.unflushed = self._producer.flush(flush_timeout_s)
        except KafkaException as error:
            with self._lock:
                self.fatal.append(f"flush raised {error}")
            self.unflushed = len(self._producer)
        return self.unflushed

    def failed_by_error(self):
        with self._lock:
            return dict(Counter(e.name() for e in self.failed.values()))


# ----------------------------------------------------------------------------- reading and judging

LEADER_MOVED_CODES = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE}


def high_watermark(consumer, topic, partition, timeout_s=30):
    """The partition's high watermark, asked again while the error is retriable: just after a
    leader change the client's metadata may still name the old leader (NOT_LEADER_FOR_PARTITION),
    which a Kafka client answers by refreshing it and asking again."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
            return high
        except KafkaException as error:
            leader_moved = error.args[0].code() in LEADER_MOVED_CODES
            if not (leader_moved or error.args[0].retriable()) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def read_back(bootstrap, topic, partitions, timeout_s=60):
    """Every record of every partition from the earliest offset up to its high watermark, read
    with a fresh consumer (assign, no group): {partition: [(offset, key, value)]}."""
    consumer = Consumer(client_config(bootstrap, **{
        "group.id": f"read-back-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.partition.eof": False, "fetch.max.bytes": 8 << 20}))
    try:
        ends = {p: high_watermark(consumer, topic, p) for p in range(partitions)}
        out = {p: [] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        pending = {p for p in range(partitions) if ends[p] > 0}
        while pending:
            if time.monotonic() > deadline:
                got = {p: len(out[p]) for p in pending}
                raise CheckFailure(f"read-back of {topic} incomplete after {timeout_s} s: high "
                                   f"watermarks {ends}, read so far {got}")
            for message in consumer.consume(1000, timeout=0.5):
                if message.error():
                    raise CheckFailure(f"read-back of {topic}: {message.error()}")
                p = message.partition()
                if message.offset() < ends[p]:
                    out[p].append((message.offset(), message.key(), message.value()))
                if message.offset() >= ends[p] - 1:
                    pending.discard(p)
        return out, ends
    finally:
        consumer.close()


@dataclass
class Verdict:
    acknowledged: int = 0
    in_log: int = 0
    lost: list = field(default_factory=list)  # (partition, offset, seq) acked, not in the log
    misplaced: list = field(default_factory=list)  # (seq, acked (p, offset), found (p, offset))
    # librdkafka acknowledges without an offset the batches before one whose answer came
    # (its "implicit ack", after a lost answer): those are judged by partition alone.
    acked_without_offset: int = 0
    duplicated: list = field(default_factory=list)  # (seq, times)
    copies: dict = field(default_factory=dict)  # seq -> [(partition, offset)] of a duplicated record
    reordered: list = field(default_factory=list)  # (partition, offset, previous seq, seq)
    corrupt: list = field(default_factory=list)  # (partition, offset, key) not as written
    unacknowledged_in_log: int = 0  # produced, never acknowledged (failed or unknown), present
    foreign: dict = field(default_factory=dict)  # key -> [(partition, offset)] of other records

    def ok(self):
        return not (self.lost or self.misplaced or self.duplicated or self.reordered or self.corrupt)

    def counts(self):
        return (f"acknowledged={self.acknowledged} in_log={self.in_log} lost={len(self.lost)} "
                f"duplicated={len(self.duplicated)} reordered={len(self.reordered)} "
                f"misplaced={len(self.misplaced)} corrupt={len(self.corrupt)} "
                f"acked_without_offset={self.acked_without_offset} "
                f"unacknowledged_in_log={self.unacknowledged_in_log}")

    def details(self, limit=10):
        lines = [self.counts()]
        for name in ("lost", "misplaced", "duplicated", "reordered", "corrupt"):
            items = getattr(self, name)
            if items:
                lines.append(f"  {name} (first {min(limit, len(items))} of {len(items)}): {items[:limit]}")
        return "\n".join(lines)


def check(acked, log, partitions):
    """Judges the log read back (`read_back`) against the acknowledgements
    (`NumberedProducer.acked`). Records whose key is not a numbered one are listed in
    `foreign` and not judged."""
    verdict = Verdict()
    found = {}  # seq -> (partition, offset) of its first copy
    copies = Counter()
    places = defaultdict(list)  # seq -> [(partition, offset)] of every copy
    for p in range(partitions):
        previous = -1
        for offset, key, value in log.get(p, []):
            if key is None or not key.startswith(KEY_PREFIX):
                verdict.foreign.setdefault(key, []).append((p, offset))
                continue
            try:
                seq = int(key[len(KEY_PREFIX):])
            except ValueError:
                verdict.corrupt.append((p, offset, key))
                continue
            verdict.in_log += 1
            if seq % partitions != p or value != record_value(seq, p):
                verdict.corrupt.append((p, offset, key))
            copies[seq] += 1
            places[seq].append((p, offset))
            found.setdefault(seq, (p, offset))
            if seq <= previous:
                verdict.reordered.append((p, offset, previous, seq))
            previous = max(previous, seq)
    verdict.duplicated = sorted((seq, n) for seq, n in copies.items() if n > 1)
    verdict.copies = {seq: places[seq] for seq, _ in verdict.duplicated}
    acknowledged = set()
    for p, deliveries in acked.items():
        for offset, seq in deliveries:
            verdict.acknowledged += 1
            acknowledged.add(seq)
            if seq not in found:
                verdict.lost.append((p, offset, seq))
            elif found[seq] != (p, offset) and not (offset is None and found[seq][0] == p):
                verdict.misplaced.append((seq, (p, offset), found[seq]))
            verdict.acked_without_offset += offset is None
    verdict.unacknowledged_in_log = len(set(found) - acknowledged)
    return verdict


# ----------------------------------------------------------------------------- replicas on disk

def segment_files(data_dir, topic, partition):
    """{file name: bytes} of the partition's `*.log` segments in `data_dir` (empty if none)."""
    directory = Path(data_dir) / f"{topic}-{partition}"
    return {f.name: f.read_bytes() for f in sorted(directory.glob("*.log"))}


# A v2 record batch's header up to its record count (Kafka's format, big endian): base offset,
# batch length, partition leader epoch, magic, CRC, attributes, last offset delta, base and max
# timestamps, producer id, producer epoch, base sequence, record count.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
LOG_OVERHEAD = 12  # base offset and batch length: the length counts the bytes after them


def batch_headers(data_dir, topic, partition):
    """[(base offset, last offset, leader epoch, producer id, producer epoch, base sequence)] of
    every batch in the partition's segments in `data_dir`, in file order; stops at the first
    header that does not parse (a torn tail)."""
    headers = []
    for data in segment_files(data_dir, topic, partition).values():
        position = 0
        while position + BATCH_HEADER.size <= len(data):
            (base, length, leader_epoch, _magic, _crc, _attributes, last_delta, _base_ts, _max_ts,
             producer_id, producer_epoch, base_sequence, _count) = BATCH_HEADER.unpack_from(data, position)
            if length <= 0:
                break
            headers.append((base, base + last_delta, leader_epoch, producer_id, producer_epoch, base_sequence))
            position += LOG_OVERHEAD + length
    return headers


def describe_duplicate_batches(data_dir, topic, copies):
    """The batches holding each copy of the duplicated records (`Verdict.copies`), as stored:
    which leader epoch wrote each copy, and with which producer epoch and sequence."""
    lines = []
    by_partition = defaultdict(list)
    for seq, places in copies.items():
        for p, offset in places:
            by_partition[p].append((offset, seq))
    for p, wanted in sorted(by_partition.items()):
        headers = batch_headers(data_dir, topic, p)
        for offset, seq in sorted(wanted):
            holding = [h for h in headers if h[0] <= offset <= h[1]]
            for base, last, leader_epoch, pid, producer_epoch, base_sequence in holding:
                lines.append(f"record {seq} at {p}/{offset}: batch {base}..{last} leader epoch {leader_epoch} "
                             f"producer {pid} epoch {producer_epoch} base sequence {base_sequence}")
    return lines


def describe_difference(reference, other):
    if sorted(reference) != sorted(other):
        sizes = {n: len(b) for n, b in other.items()}
        return f"segments {sorted(other)} (sizes {sizes}) vs {sorted(reference)}"
    for name in sorted(reference):
        a, b = reference[name], other[name]
        if a != b:
            first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            return f"{name}: {len(b)} bytes vs {len(a)}, first difference at byte {first}"
    return "identical"


def replica_differences(data_dirs, topic, partitions):
    """[(partition, node, how it differs from the first node)] over every node in
    `data_dirs` ({node: dir}); empty when every replica's segments are identical."""
    differences = []
    for p in range(partitions):
        views = {node: segment_files(d, topic, p) for node, d in sorted(data_dirs.items())}
        first_node = min(views)
        reference = views[first_node]
        if not reference:
            differences.append((p, first_node, "no segment file"))
        for node, view in views.items():
            if view != reference:
                differences.append((p, node, f"vs node {first_node}: {describe_difference(reference, view)}"))
    return differences


def wait_replicas_identical(data_dirs, topic, partitions, timeout_s=30):
    """Polls until every replica's segments are byte-identical (followers may still be
    catching up); returns (identical, differences at the end, seconds waited)."""
    started = time.monotonic()
    while True:
        differences = replica_differences(data_dirs, topic, partitions)
        if not differences or time.monotonic() - started > timeout_s:
            return not differences, differences, time.monotonic() - started
        time.sleep(0.5)


# ----------------------------------------------------------------------------- the kill loop

@dataclass
class LoopOptions:
    kills: int = 20  # leader kills (or pauses) to do
    duration_s: float = 150  # ... unless this much time has passed first
    mode: str = "kill"  # "kill": kill -9 then restart; "stop": SIGSTOP, hold, SIGCONT
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    rate: int = 500  # records per second
    acks_between: int = 20  # acknowledgements to see after each leader change
    pause_s: tuple = (1.0, 6.0)  # "stop" mode: how long the leader stays stopped (uniform)
    seed: int = None
    recover_timeout_s: float = 60  # for the full ISR to come back after a restart
    progress_timeout_s: float = 30  # for acknowledgements to resume after a leader change
    avoid_controller: bool = False  # never the active controller as the victim (while others lead)


@dataclass
class LoopResult:
    kills: int = 0
    stopped_early: str = None  # why the loop ended before `kills` (beyond the time bound)
    produced: int = 0
    failed_by_error: dict = field(default_factory=dict)
    fatal: list = field(default_factory=list)
    unflushed: int = 0
    verdict: Verdict = None
    quiet: str = None  # None once the cluster was quiet at the end, else why not
    unread: str = None  # why the records could not be read back, if they could not
    identical: bool = False
    differences: list = field(default_factory=list)
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)
    frozen_leaders_replaced: int = 0  # "stop" mode: frozen leaders another node led for by SIGCONT
    controller_victims: int = 0  # failures of the active controller (also leading a partition)
    duplicate_batches: list = field(default_factory=list)  # describe_duplicate_batches, when any

    def ok(self):
        return (self.verdict is not None and self.verdict.ok() and self.identical and not self.fatal
                and not self.stopped_early and self.quiet is None and not self.unflushed)

    def report(self):
        verdict = self.verdict
        lines = [
            f"kills={self.kills} acknowledged={verdict.acknowledged if verdict else '?'} "
            f"lost={len(verdict.lost) if verdict else '?'} "
            f"duplicated={len(verdict.duplicated) if verdict else '?'} "
            f"reordered={len(verdict.reordered) if verdict else '?'} "
            f"replicas_identical={'yes' if self.identical else 'no'}",
            f"  produced={self.produced} failed={self.failed_by_error} unflushed={self.unflushed} "
            f"fatal={self.fatal} seconds={self.seconds:.0f} controller_victims={self.controller_victims} "
            f"frozen_leaders_replaced_before_sigcont={self.frozen_leaders_replaced}",
        ]
        if verdict:
            lines.append("  " + verdict.details().replace("\n", "\n  "))
        if self.stopped_early:
            lines.append(f"  loop stopped early: {self.stopped_early}")
        if self.quiet:
            lines.append(f"  not quiet at the end: {self.quiet}")
        if self.unread:
            lines.append(f"  not read back: {self.unread}")
        for line in self.duplicate_batches[:20]:
            lines.append(f"  duplicate: {line}")
        for p, node, how in self.differences[:12]:
            lines.append(f"  replica differs: partition {p} node {node}: {how}")
        for name, values in self.timings.items():
            if values:
                lines.append(f"  {name}: min {min(values):.1f} s, max {max(values):.1f} s, "
                             f"mean {sum(values) / len(values):.1f} s over {len(values)}")
        return "\n".join(lines)


def _asked_again(ask, tries=3):
    """`ask()`, asked again after a failure: a loaded machine can hold one admin answer past
    its timeout, and the script should not stop for that."""
    for attempt in range(tries):
        try:
            return ask()
        except Exception:
            if attempt == tries - 1:
                raise
            time.sleep(1)


def _one_failure(cluster, admin, topic, producer, options, rng, result, say):
    """Kills (or stops) the leader of a random partition, waits for the cluster to go on
    without it, brings it back."""
    states = _asked_again(lambda: partition_states(admin, topic))
    controller = _asked_again(lambda: admin.describe_cluster(request_timeout=10).result(15).controller.id)
    candidates = [p for p, state in states.items() if state[0] != controller or not options.avoid_controller]
    partition = rng.choice(sorted(candidates or states))
    victim = states[partition][0]
    result.controller_victims += victim == controller
    before = producer.acked_total(partition)
    started = time.monotonic()
    if options.mode == "kill":
        cluster.kill9(victim)
        _, moved = wait_until(
            f"partitions led by killed node {victim} get new leaders",
            cluster.session_timeout_ms / 1000 + 15,
            lambda: all(s[0] not in (victim, -1) for s in partition_states(admin, topic).values()))
        result.timings.setdefault("leaders moved after kill -9", []).append(moved)
        took = producer.wait_acked(before + options.acks_between, options.progress_timeout_s,
                                   f"acks=all records on p{partition} acknowledged with node {victim} killed",
                                   partition)
        restart_at = time.monotonic()
        cluster.restart(victim)
        result.timings.setdefault("restart until serving", []).append(time.monotonic() - restart_at)
        say(f"kill {result.kills + 1}: node {victim} (leader of p{partition}"
            f"{', the controller' if victim == controller else ''}); leaders moved in "
            f"{moved:.1f} s, {options.acks_between}+ acks on p{partition} {took:.1f} s after that")
    else:
        hold = rng.uniform(*options.pause_s)
        cluster.pause(victim)
        time.sleep(hold)
        moved = _leader_moved_away(cluster, topic, partition, victim)
        result.frozen_leaders_replaced += moved
        cluster.resume(victim)
        took = producer.wait_acked(before + options.acks_between, options.progress_timeout_s,
                                   f"acks=all records on p{partition} acknowledged after node {victim} resumed",
                                   partition)
        say(f"stop {result.kills + 1}: node {victim} (leader of p{partition}"
            f"{', the controller' if victim == controller else ''}) stopped {hold:.1f} s "
            f"({'replaced' if moved else 'still leader'} by then); {options.acks_between}+ acks on "
            f"p{partition} {took:.1f} s after SIGCONT")
    result.timings.setdefault("failure to acks resumed", []).append(time.monotonic() - started)


def _leader_moved_away(cluster, topic, partition, frozen):
    """Whether another node's Metadata names a leader other than `frozen` for the partition
    (asked of one other node, so the frozen one is not waited for)."""
    witness = next(n for n in cluster.node_ids if n != frozen)
    admin = AdminClient(client_config(cluster.node_bootstrap(witness)))
    try:
        return partition_states(admin, topic, timeout_s=2)[partition][0] not in (frozen, -1)
    except Exception:  # noqa: BLE001 - unknown counts as not moved
        return False


def run_kill_loop(cluster, topic, options, say=print):
    """The whole run: topic, producer, the failure loop, then the verdicts (LoopResult). Never
    raises for what it judges: the caller asserts on result.ok() and prints result.report()."""
    rng = random.Random(options.seed)
    nodes = list(cluster.node_ids)
    result = LoopResult()
    started = time.monotonic()
    admin = AdminClient(client_config(cluster.bootstrap))
    create_topic(admin, topic, options.partitions, options.replication_factor,
                 {"min.insync.replicas": str(options.min_insync_replicas)})
    wait_all_in_sync(admin, topic, options.partitions, nodes, options.recover_timeout_s)
    producer = NumberedProducer(cluster.bootstrap, topic, options.partitions, rate=options.rate).start()
    try:
        producer.wait_acked(options.acks_between, options.progress_timeout_s, "first acknowledgements")
        deadline = started + options.duration_s
        while result.kills < options.kills and time.monotonic() < deadline:
            took = wait_all_in_sync(admin, topic, options.partitions, nodes, options.recover_timeout_s)
            result.timings.setdefault("full ISR back", []).append(took)
            _one_failure(cluster, admin, topic, producer, options, rng, result, say)
            result.kills += 1
            if producer.fatal:
                raise CheckFailure(f"the idempotent producer failed fatally: {producer.fatal}")
        if result.kills < options.kills:
            result.stopped_early = f"time bound of {options.duration_s:.0f} s reached"
    except CheckFailure as failure:
        result.stopped_early = str(failure)
        say(f"loop stopped: {failure}")
        for node in nodes:  # bring every node back for the verdicts
            state = cluster.states()[node]
            if state == "paused":
                cluster.resume(node)
            elif state == "stopped":
                cluster.restart(node)
    finally:
        result.unflushed = producer.stop()
    result.produced = producer.produced
    result.failed_by_error = producer.failed_by_error()
    result.fatal = list(producer.fatal)
    try:
        wait_all_in_sync(admin, topic, options.partitions, nodes, options.recover_timeout_s)
    except CheckFailure as failure:
        result.quiet = str(failure)
    try:
        log, _ = read_back(cluster.bootstrap, topic, options.partitions)
        result.verdict = check(producer.acked, log, options.partitions)
    except CheckFailure as failure:
        result.unread = str(failure)
    dirs = {node: cluster.data_dir(node) for node in nodes}
    result.identical, result.differences, _ = wait_replicas_identical(dirs, topic, options.partitions)
    if result.verdict and result.verdict.copies:
        result.duplicate_batches = describe_duplicate_batches(dirs[min(dirs)], topic, result.verdict.copies)
    result.seconds = time.monotonic() - started
    return result

