"""confluent-kafka (librdkafka 2.x) in a consumer group (docs/clients.md, "Consumer groups"):
  produce HOST:PORT,... COUNT PREFIX sends PREFIX-0..COUNT-1 (acks=all, idempotent, lz4,
                                     lingering 5 ms so records share batches), prints
                                     {"acked": [offset, value]} for each, then {"done": 1}
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

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

TOPIC = "__cluster_metadata"
MODE, SERVERS, N, NAME = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


def say(event):
    print(json.dumps(event), flush=True)


def on_assign(consumer, partitions):
    say({"assigned": [p.partition for p in partitions]})


if MODE == "produce":
    producer = Producer({"bootstrap.servers": SERVERS, "acks": "all", "enable.idempotence": True,
                         "compression.type": "lz4", "linger.ms": 5})

    def on_delivery(error, message):
        if error is None:
            say({"acked": [message.offset(), message.value().decode()]})
        else:
            say({"failed": str(error)})

    for i in range(N):
        producer.produce(TOPIC, f"{NAME}-{i}".encode(), partition=0, on_delivery=on_delivery)
        producer.poll(0)
    if producer.flush(60) != 0:
        say({"failed": "not every record delivered within 60 s"})
        sys.exit(1)
    say({"done": 1})
    sys.exit(0)

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
