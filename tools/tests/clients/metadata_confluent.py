"""Metadata through confluent-kafka 2 (librdkafka; docs/clients.md): prints one JSON line with
the brokers [id, host, port], the controller and the leader of __cluster_metadata-0.
Usage: python metadata_confluent.py HOST:PORT"""
import json
import sys

from confluent_kafka.admin import AdminClient

admin = AdminClient({"bootstrap.servers": sys.argv[1]})
metadata = admin.list_topics(topic="__cluster_metadata", timeout=10)
partition = metadata.topics["__cluster_metadata"].partitions[0]
print(json.dumps({
    "brokers": sorted([b.id, b.host, b.port] for b in metadata.brokers.values()),
    "controller": metadata.controller_id,
    "leader": partition.leader,
    "replicas": list(partition.replicas),
}))
