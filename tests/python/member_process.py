"""A consumer group member in a process of its own, for tests that kill it with SIGKILL:
`member_process.py BOOTSTRAP GROUP TOPIC [key=value ...]` consumes TOPIC in GROUP with the
given client settings and prints "owned N" each time its assignment changes."""

import sys

from confluent_kafka import Consumer


def main():
    bootstrap, group, topic, *settings = sys.argv[1:]
    config = {"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": group,
              "auto.offset.reset": "earliest", **dict(s.split("=", 1) for s in settings)}
    consumer = Consumer(config)
    owned = set()

    def on_assign(_consumer, partitions):
        owned.update((p.topic, p.partition) for p in partitions)
        print(f"owned {len(owned)}", flush=True)

    def on_revoke(_consumer, partitions):
        owned.difference_update((p.topic, p.partition) for p in partitions)
        print(f"owned {len(owned)}", flush=True)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main()
