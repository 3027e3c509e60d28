"""Produce and consume through confluent-kafka 2 (librdkafka; docs/clients.md): an idempotent
producer (acks=all, lz4; librdkafka asks any one broker for its producer id, which every
ringraft node hands out) sends COUNT records PREFIX-0.. to __cluster_metadata-0, one every few
milliseconds, while a consumer assigned the partition reads it from the beginning (librdkafka
needs a group.id even for a manual assignment; nothing is committed). The events
it prints and the run: produce_consume_common.py.
With IDEMPOTENT=0 in the environment the producer is not idempotent.
Usage: python produce_consume_confluent.py HOST:PORT,... COUNT PREFIX"""
import os
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from produce_consume_common import (COUNT, PREFIX, SERVERS, TOPIC, finished, on_acked,
                                    on_consumed, on_failed, run)


def consume():
    consumer = Consumer({"bootstrap.servers": SERVERS, "group.id": "ringraft-test",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    while not finished.is_set():
        message = consumer.poll(0.2)
        if message is None or message.error():
            continue
        on_consumed(message.offset(), message.value().decode("utf-8", "replace"))
    consumer.close()


def delivered(error, message):
    value = message.value().decode()
    if error is None:
        on_acked(message.offset(), value)
    else:
        on_failed(value, str(error))


def produce():
    idempotent = os.environ.get("IDEMPOTENT", "1") == "1"
    producer = Producer({"bootstrap.servers": SERVERS, "acks": "all",
                         "enable.idempotence": idempotent, "compression.type": "lz4",
                         "linger.ms": 2, "message.timeout.ms": 60000})
    for i in range(COUNT):
        producer.produce(TOPIC, value=f"{PREFIX}-{i}".encode(), partition=0,
                         on_delivery=delivered)
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(60)


run(consume, produce)
