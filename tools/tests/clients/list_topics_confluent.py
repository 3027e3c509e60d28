"""Every topic through confluent-kafka 2's AdminClient (librdkafka; docs/clients.md): the
Metadata request for all topics that librdkafka sends in v9+. Prints one JSON line with the
topic names and each one's partition count.
Usage: python list_topics_confluent.py HOST:PORT"""
import json
import sys

from confluent_kafka.admin import AdminClient

admin = AdminClient({"bootstrap.servers": sys.argv[1]})
metadata = admin.list_topics(timeout=10)
print(json.dumps({
    "topics": {name: len(t.partitions) for name, t in metadata.topics.items()},
    "brokers": len(metadata.brokers),
}))
