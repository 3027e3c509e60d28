"""confluent-kafka (librdkafka 2.x) in a consumer group (docs/clients.md, "Consumer groups"):
  consume HOST:PORT,... TAKE GROUP   subscribes to __cluster_metadata in GROUP (no auto-commit),
                                     prints {"assigned": [partitions]} on its assignment, then
                                     {"consumed": [offset, value]} per data record and
                                     {"committed": offset} after each synchronous commit() has
                                     returned, until TAKE records; then
                                     {"committed_after": offset} and {"done": 1}
Every wait is bounded (60 s); a failure prints {"failed": why} and exits 1."""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

TOPIC = "__cluster_metadata"
MODE, SERVERS, N, NAME = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def say(event):
    print(json.dumps(event), flush=True)


def on_assign(consumer, partitions):
    say({"assigned": [p.partition for p in partitions]})


consumer = Consumer({"bootstrap.servers": SERVERS, "group.id": NAME,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
consumer.subscribe([TOPIC], on_assign=on_assign)
deadline = time.monotonic() + 60
taken = 0
while taken < N and time.monotonic() < deadline:
    message = consumer.poll(0.2)
    if message is None:
        continue
    if message.error():
        say({"error": str(message.error())})
        continue
    say({"consumed": [message.offset(), message.value().decode("utf-8", "replace")]})
    taken += 1
    try:
        done = consumer.commit(message=message, asynchronous=False)
    except KafkaException as e:
        say({"failed": f"commit: {e}"})
        sys.exit(1)
    say({"committed": done[0].offset})
if taken < N:
    say({"failed": f"read {taken} of {N} within 60 s"})
    sys.exit(1)
committed = consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)
say({"committed_after": committed[0].offset})
consumer.close()
say({"done": 1})
