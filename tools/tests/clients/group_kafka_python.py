"""kafka-python 3 in a consumer group (docs/clients.md, "Consumer groups"). Two modes:
  produce HOST:PORT,... COUNT PREFIX      sends PREFIX-0..COUNT-1 with acks=all, prints
                                          {"acked": [offset, value]} for each, then {"done": 1}
  consume HOST:PORT,... TAKE GROUP        subscribes to __cluster_metadata in GROUP (no
                                          auto-commit), prints {"committed_before": offset|null}
                                          once assigned, then {"consumed": [offset, value]} per
                                          data record and {"committed": offset} after each
                                          synchronous commit, until TAKE records; then
                                          {"committed_after": offset} and {"done": 1}
  member HOST:PORT,... SECONDS GROUP     subscribes in GROUP and polls for SECONDS, printing
                                          {"assigned": [partitions]} at every assignment, then
                                          closes (LeaveGroup) and prints {"done": 1}
Every wait is bounded (60 s); a failure prints {"failed": why} and exits 1."""
import json
import sys
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition

TOPIC = "__cluster_metadata"
MODE, SERVERS, N, NAME = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
PARTITION = TopicPartition(TOPIC, 0)


def say(event):
    print(json.dumps(event), flush=True)


def produce():
    producer = KafkaProducer(bootstrap_servers=SERVERS, acks="all", request_timeout_ms=5000,
                             retry_backoff_ms=100)
    for i in range(N):
        meta = producer.send(TOPIC, value=f"{NAME}-{i}".encode(), partition=0).get(timeout=30)
        say({"acked": [meta.offset, f"{NAME}-{i}"]})
    producer.close(timeout=10)


def consume():
    consumer = KafkaConsumer(bootstrap_servers=SERVERS, group_id=NAME,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=10000, heartbeat_interval_ms=1000,
                             request_timeout_ms=15000)
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200, max_records=1, update_offsets=False)
    if not consumer.assignment():
        say({"failed": "no assignment within 60 s"})
        sys.exit(1)
    say({"committed_before": consumer.committed(PARTITION)})
    taken = 0
    while taken < N and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=200, max_records=N - taken)
        last = None
        for records in batch.values():
            for record in records:
                say({"consumed": [record.offset, record.value.decode("utf-8", "replace")]})
                taken += 1
                last = record.offset
        if last is not None:
            consumer.commit()
            say({"committed": last + 1})
    if taken < N:
        say({"failed": f"read {taken} of {N} within 60 s"})
        sys.exit(1)
    say({"committed_after": consumer.committed(PARTITION)})
    consumer.close()


class Announce(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        pass

    def on_partitions_assigned(self, assigned):
        say({"assigned": sorted(p.partition for p in assigned)})


def member():
    consumer = KafkaConsumer(bootstrap_servers=SERVERS, group_id=NAME,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=10000, heartbeat_interval_ms=500,
                             request_timeout_ms=15000)
    consumer.subscribe([TOPIC], listener=Announce())
    end = time.monotonic() + N
    while time.monotonic() < end:
        consumer.poll(timeout_ms=200)
    consumer.close()


if MODE == "produce":
    produce()
elif MODE == "member":
    member()
else:
    consume()
say({"done": 1})
