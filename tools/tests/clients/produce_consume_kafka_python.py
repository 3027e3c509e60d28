"""Produce and consume through kafka-python 3 (docs/clients.md): a producer with acks=all,
idempotent as kafka-python 3 is by default (it asks any node for its producer id), sends COUNT
records PREFIX-0.. to __cluster_metadata-0, one every few milliseconds, while a consumer
assigned the partition (no group) reads it from the beginning. The events it prints and the
run: produce_consume_common.py.
With IDEMPOTENT=0 and RETRIES=0 in the environment the producer is not idempotent and a failed
send is reported, never retried (so a record is written at most once even across a leader kill).
Usage: python produce_consume_kafka_python.py HOST:PORT,... COUNT PREFIX"""
import os
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from produce_consume_common import (COUNT, PREFIX, SERVERS, TOPIC, finished, on_acked,
                                    on_consumed, on_failed, run)

BOOTSTRAP = SERVERS.split(",")


def consume():
    consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             request_timeout_ms=10000)
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    while not finished.is_set():
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                on_consumed(record.offset, record.value.decode("utf-8", "replace"))
    consumer.close()


def produce():
    idempotent = os.environ.get("IDEMPOTENT", "1") == "1"
    producer = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all",
                             enable_idempotence=idempotent,
                             retries=int(os.environ.get("RETRIES", "2147483647")),
                             request_timeout_ms=5000, retry_backoff_ms=100)
    for i in range(COUNT):
        value = f"{PREFIX}-{i}"
        future = producer.send(TOPIC, value=value.encode(), partition=0)
        future.add_callback(lambda m, v=value: on_acked(m.offset, v))
        future.add_errback(lambda e, v=value: on_failed(v, repr(e)))
        time.sleep(0.005)
    producer.flush(timeout=60)
    producer.close(timeout=10)


run(consume, produce)
