"""Timestamps through kafka-python 3 (docs/clients.md, "Offsets by timestamp").
`produce T...`: sends one record per timestamp T (ms) to __cluster_metadata-0 with
send(..., timestamp_ms=T), acks=all, idempotence off, each acknowledged before the next (so each
is a batch of its own); prints {"acked": [[offset, T], ...]}.
`query T...`: KafkaConsumer.offsets_for_times for each T (one call each) and
KafkaAdminClient.list_partition_offsets with OffsetSpec.MAX_TIMESTAMP (ListOffsets v7); prints
{"found": {"T": [offset, timestamp] or null, ...}, "max": [offset, timestamp] or null}.
Usage: python timestamps_kafka_python.py HOST:PORT,... produce|query T..."""
import json
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import OffsetSpec

TOPIC = "__cluster_metadata"
servers, mode, stamps = sys.argv[1].split(","), sys.argv[2], [int(t) for t in sys.argv[3:]]
partition = TopicPartition(TOPIC, 0)

if mode == "produce":
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", enable_idempotence=False,
                             request_timeout_ms=5000, retry_backoff_ms=100)
    acked = []
    for t in stamps:
        meta = producer.send(TOPIC, value=f"ts-{t}".encode(), partition=0, timestamp_ms=t)
        acked.append([meta.get(timeout=20).offset, t])
    producer.close(timeout=10)
    print(json.dumps({"acked": acked}), flush=True)
else:
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=10000)
    found = {}
    for t in stamps:
        answer = consumer.offsets_for_times({partition: t}, timeout_ms=10000)[partition]
        found[str(t)] = None if answer is None else [answer.offset, answer.timestamp]
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=10000)
    top = admin.list_partition_offsets({partition: OffsetSpec.MAX_TIMESTAMP})[partition]
    admin.close()
    biggest = None if top.offset < 0 else [top.offset, top.timestamp]
    print(json.dumps({"found": found, "max": biggest}), flush=True)
