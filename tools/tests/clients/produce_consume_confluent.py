"""Produce and consume through confluent-kafka 2 (librdkafka; docs/clients.md): an idempotent
producer (acks=all, lz4; librdkafka asks any one broker for its producer id, which every
ringraft node hands out) sends COUNT records PREFIX-0.. to __cluster_metadata-0, one every few milliseconds, while a consumer assigned the partition reads
it from the beginning (librdkafka needs a group.id even for a manual assignment; no group
coordinator is ever asked). Prints one JSON line per event: {"acked": [offset, value]},
{"failed": [value, error]}, {"consumed": [offset, value]}, then {"done": ...} once every acked
record was consumed or the deadline passed.
With IDEMPOTENT=0 in the environment the producer is not idempotent.
Usage: python produce_consume_confluent.py HOST:PORT,... COUNT PREFIX"""
import json
import os
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

TOPIC = "__cluster_metadata"
servers, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
acked, consumed = set(), set()
finished = threading.Event()


def say(event):
    with lock:
        print(json.dumps(event), flush=True)


def consume():
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "ringraft-test",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    while not finished.is_set():
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        value = message.value().decode("utf-8", "replace")
        consumed.add(value)
        say({"consumed": [message.offset(), value]})
    consumer.close()


def delivered(error, message):
    value = message.value().decode()
    if error is None:
        acked.add(value)
        say({"acked": [message.offset(), value]})
    else:
        say({"failed": [value, str(error)]})


reader = threading.Thread(target=consume)
reader.start()
idempotent = os.environ.get("IDEMPOTENT", "1") == "1"
producer = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": idempotent,
                     "compression.type": "lz4", "linger.ms": 2, "message.timeout.ms": 60000})
for i in range(count):
    producer.produce(TOPIC, value=f"{prefix}-{i}".encode(), partition=0, on_delivery=delivered)
    producer.poll(0)
    time.sleep(0.005)
producer.flush(60)
deadline = time.time() + 60
while time.time() < deadline and not acked <= consumed:
    time.sleep(0.1)
finished.set()
reader.join(timeout=20)
say({"done": {"acked": len(acked), "consumed": len(consumed & acked)}})
