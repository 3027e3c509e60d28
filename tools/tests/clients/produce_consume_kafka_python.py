"""Produce and consume through kafka-python 3 (docs/clients.md): a producer with acks=all,
idempotent as kafka-python 3 is by default (it asks any node for its producer id), sends COUNT
records PREFIX-0.. to __cluster_metadata-0,
one every few milliseconds, while a consumer assigned the partition (no group) reads it from the
beginning. Prints one JSON line per event: {"acked": [offset, value]}, {"failed": [value, error]},
{"consumed": [offset, value]}, then {"done": ...} once every acked record was consumed or the
deadline passed.
With IDEMPOTENT=0 and RETRIES=0 in the environment the producer is not idempotent and a failed
send is reported, never retried (so a record is written at most once even across a leader kill).
Usage: python produce_consume_kafka_python.py HOST:PORT,... COUNT PREFIX"""
import os
import json
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

TOPIC = "__cluster_metadata"
servers, count, prefix = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
acked, consumed = set(), set()
finished = threading.Event()


def say(event):
    with lock:
        print(json.dumps(event), flush=True)


def consume():
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=10000)
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    while not finished.is_set():
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                value = record.value.decode("utf-8", "replace")
                consumed.add(value)
                say({"consumed": [record.offset, value]})
    consumer.close()


reader = threading.Thread(target=consume)
reader.start()
idempotent = os.environ.get("IDEMPOTENT", "1") == "1"
producer = KafkaProducer(bootstrap_servers=servers, acks="all", enable_idempotence=idempotent,
                         retries=int(os.environ.get("RETRIES", "2147483647")),
                         request_timeout_ms=5000, retry_backoff_ms=100)
for i in range(count):
    value = f"{prefix}-{i}"
    future = producer.send(TOPIC, value=value.encode(), partition=0)
    future.add_callback(lambda m, v=value: (acked.add(v), say({"acked": [m.offset, v]})))
    future.add_errback(lambda e, v=value: say({"failed": [v, repr(e)]}))
    time.sleep(0.005)
producer.flush(timeout=60)
producer.close(timeout=10)
deadline = time.time() + 60
while time.time() < deadline and not acked <= consumed:
    time.sleep(0.1)
finished.set()
reader.join(timeout=20)
say({"done": {"acked": len(acked), "consumed": len(consumed & acked)}})
