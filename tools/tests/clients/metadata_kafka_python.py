"""Metadata through kafka-python 3 (docs/clients.md): prints one JSON line with the brokers
[id, host, port], the controller and the leader of __cluster_metadata-0 as the client sees them.
Usage: python metadata_kafka_python.py HOST:PORT"""
import json
import sys

from kafka import KafkaAdminClient

admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=10000)
try:
    cluster = admin.describe_cluster()
    topics = admin.describe_topics(["__cluster_metadata"])
finally:
    admin.close()
partition = topics[0]["partitions"][0]
print(json.dumps({
    "brokers": sorted([b["broker_id"], b["host"], b["port"]] for b in cluster["brokers"]),
    "controller": cluster["controller_id"],
    "leader": partition["leader_id"],
    "replicas": partition["replica_nodes"],
}))
