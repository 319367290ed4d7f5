"""Consumers in threads of their own that keep a timed record of what they consumed and what
they owned, for the group protocol suites (test_consumer_protocol*.py): each commits what it
processed (after processing, and before giving a partition up), so that a record is consumed
twice only if a commit was lost or two members owned its partition at once."""

import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer

POLL_S = 0.05
# Records handled between two polls, at most.
BATCH_MAX = 100
COMMIT_EVERY_S = 0.3


class Member:
    """One consumer of `group` on `topics` (a list; a name starting with ^ is a regular
    expression) with `config` over the defaults; runs until stop()."""

    def __init__(self, bootstrap, group, topics, name, processing_s=0.0, **config):
        """`processing_s`: how long handling one record takes (the member sleeps that long per
        record, after each batch it polls), as an application's work would."""
        self.name = name
        self._processing_s = processing_s
        self.records = []  # (partition, offset, value, seconds)
        self.assignments = []  # (seconds, frozenset of (topic, partition)) after each change
        self.errors = []
        self._owned = set()
        self._stop = threading.Event()
        self._close = True
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "enable.auto.offset.store": False, **config})
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _note(self):
        self.assignments.append((time.monotonic(), frozenset(self._owned)))

    def _on_assign(self, consumer, partitions):
        self._owned |= {(p.topic, p.partition) for p in partitions}
        self._note()

    def _on_revoke(self, consumer, partitions):
        self._commit()
        self._owned -= {(p.topic, p.partition) for p in partitions}
        self._note()

    def _on_lost(self, consumer, partitions):
        self._owned -= {(p.topic, p.partition) for p in partitions}
        self._note()

    def _commit(self):
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != -168:  # _NO_OFFSET: nothing processed since the last commit
                self.errors.append(e.args[0])

    def _run(self):
        last_commit = time.monotonic()
        while not self._stop.is_set():
            batch = self.consumer.consume(BATCH_MAX, POLL_S)
            for m in batch:
                if m.error() is None:
                    self.records.append((m.partition(), m.offset(), m.value(), time.monotonic()))
                else:
                    self.errors.append(m.error())
            time.sleep(self._processing_s * len(batch))
            for m in batch:
                if m.error() is None:
                    self.consumer.store_offsets(m)
            if time.monotonic() - last_commit > COMMIT_EVERY_S:
                self._commit()
                last_commit = time.monotonic()
        if self._close:
            self._commit()
            self.consumer.close()

    def owned(self):
        return set(self._owned)

    def stop(self, close=True):
        """Leaves the group (close=True) or just stops polling, as a process that hangs."""
        self._close = close
        self._stop.set()
        self.thread.join(30)


class PacedProducer:
    """Produces records "0", "1", ... to `topic` at about `rate` per second until stop(), keyed
    by their number so they spread over the partitions."""

    def __init__(self, bootstrap, topic, rate):
        self.sent = 0
        self.errors = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                                   "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        self._topic, self._rate = topic, rate
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_delivery(self, err, _msg):
        if err is not None:
            self.errors.append(err)

    def _run(self):
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * self._rate)
            while self.sent < due:
                key = str(self.sent).encode()
                self._producer.produce(self._topic, key=key, value=key, on_delivery=self._on_delivery)
                self.sent += 1
            self._producer.poll(0.01)
        assert self._producer.flush(30) == 0

    def stop(self):
        self._stop.set()
        self.thread.join(60)


def consumed_values(members):
    """Every record value consumed by `members`, with repeats."""
    return [int(r[2]) for m in members for r in m.records]


def consumed_positions(members):
    """Every (partition, offset) consumed by `members`, with repeats."""
    return [(r[0], r[1]) for m in members for r in m.records]


def wait_for(condition, timeout_s, what, members=()):
    """Waits until `condition()`; on timeout, fails saying what each of `members` owns."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    owned = {m.name: sorted(m.owned()) for m in members}
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}; owned: {owned}")


def longest_pause(member, start, end):
    """The longest time `member` consumed nothing within [start, end]."""
    times = [start] + [r[3] for r in member.records if start <= r[3] <= end] + [end]
    return max(b - a for a, b in zip(times, times[1:]))


def kept_members_pauses(members, events, window_s):
    """For each membership change at time t, the longest pause in [t, t + window_s] of each
    member that owned partitions before t and still owned some of them after the window:
    how long members that keep partitions stop consuming while the group rebalances."""
    pauses = []
    for t in events:
        for m in members:
            before = owned_at(m, t)
            after = owned_at(m, t + window_s)
            if before and before & after:
                pauses.append(longest_pause(m, t, t + window_s))
    return pauses


def owned_at(member, t):
    owned = frozenset()
    for when, assignment in member.assignments:
        if when > t:
            break
        owned = assignment
    return owned
