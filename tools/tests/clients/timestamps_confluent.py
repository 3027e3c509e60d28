"""Timestamps through confluent-kafka 2 (librdkafka; docs/clients.md, "Offsets by timestamp"):
Consumer.offsets_for_times for each T (ms, one call each: librdkafka returns the offset only,
-1 when no record reaches T) and AdminClient.list_offsets with OffsetSpec.max_timestamp()
(ListOffsets v7). Prints {"found": {"T": offset, ...}, "max": [offset, timestamp]}.
Usage: python timestamps_confluent.py HOST:PORT,... T..."""
import json
import sys

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

TOPIC = "__cluster_metadata"
servers, stamps = sys.argv[1], [int(t) for t in sys.argv[2:]]

consumer = Consumer({"bootstrap.servers": servers, "group.id": "timestamps",
                     "enable.auto.commit": False})
found = {}
for t in stamps:
    [answer] = consumer.offsets_for_times([TopicPartition(TOPIC, 0, t)], timeout=10)
    if answer.error is not None:
        raise SystemExit(f"offsets_for_times({t}): {answer.error}")
    found[str(t)] = answer.offset
consumer.close()

admin = AdminClient({"bootstrap.servers": servers})
futures = admin.list_offsets({TopicPartition(TOPIC, 0): OffsetSpec.max_timestamp()},
                             request_timeout=10)
top = next(iter(futures.values())).result(timeout=15)
print(json.dumps({"found": found, "max": [top.offset, top.timestamp]}), flush=True)
