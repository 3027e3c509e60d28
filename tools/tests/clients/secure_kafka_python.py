"""kafka-python 3 against a secured listener (docs/security.md, "Clients"): SASL_SSL with
SCRAM-SHA-512, or SSL with a client certificate. CONFIG is a JSON object of kafka-python
settings (security_protocol, ssl_cafile, sasl_mechanism, sasl_plain_username,
sasl_plain_password, ssl_certfile, ssl_keyfile), given to the producer or the consumer as they
are.

  produce SERVERS COUNT PREFIX CONFIG   sends PREFIX-0 .. PREFIX-(COUNT-1) to __cluster_metadata-0
                                        with acks=all (idempotence off, docs/clients.md)
  consume SERVERS COUNT PREFIX CONFIG   reads the partition from the beginning (manual
                                        assignment, no group) until COUNT records whose value
                                        starts with PREFIX were read, or 20 s passed

Prints one JSON line per event: {"acked": [offset, value]}, {"failed": [value, error]},
{"consumed": [offset, value]}, {"logged": message} for every error kafka-python logs (an
authentication or handshake failure is reported only there: the client itself keeps retrying
until its bootstrap timeout), {"exception": error} if the client could not start, then
{"done": {...}}. Every wait is bounded (bootstrap 3 s, requests 5 s, the whole run 25 s)."""
import json
import logging
import os
import sys
import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

TOPIC = "__cluster_metadata"
BOUNDS = {"bootstrap_timeout_ms": 3000, "request_timeout_ms": 5000}
lock = threading.Lock()


def say(event):
    with lock:
        print(json.dumps(event), flush=True)


def describe(error):
    return f"{type(error).__name__}: {error}"


class Reporter(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({describe(record.exc_info[1])})"
        say({"logged": message})


def produce(servers, count, prefix, config):
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", enable_idempotence=False,
                             max_block_ms=5000, retries=2, **BOUNDS, **config)
    answered = threading.Semaphore(0)

    # A future's callbacks get their extra arguments first, then the outcome.
    def acked(value, metadata):
        say({"acked": [metadata.offset, value]})
        answered.release()

    def failed(value, error):
        say({"failed": [value, describe(error)]})
        answered.release()

    for i in range(count):
        value = f"{prefix}-{i}"
        try:
            future = producer.send(TOPIC, value=value.encode(), partition=0)
        except Exception as error:  # the metadata wait timed out: the send never started
            failed(value, error)
            continue
        future.add_callback(acked, value)
        future.add_errback(failed, value)
    producer.flush(timeout=20)
    deadline = time.time() + 10
    pending = count
    while pending and time.time() < deadline:
        if answered.acquire(timeout=0.1):
            pending -= 1
    producer.close(timeout=5)
    return {"unanswered": pending}


def consume(servers, count, prefix, config):
    consumer = KafkaConsumer(bootstrap_servers=servers, group_id=None, enable_auto_commit=False,
                             **BOUNDS, **config)
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    read = 0
    deadline = time.time() + 20
    while read < count and time.time() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            for record in records:
                value = record.value.decode("utf-8", "replace")
                read += value.startswith(prefix)
                say({"consumed": [record.offset, value]})
    consumer.close()
    return {"read": read}


def overran():
    say({"exception": "the run took over 25 s"})
    os._exit(3)


def main():
    mode, servers, count, prefix, config = sys.argv[1:6]
    reporter = Reporter(level=logging.ERROR)
    logging.getLogger("kafka").addHandler(reporter)
    # The whole run is bounded even if a client call overstays its own timeouts.
    watchdog = threading.Timer(25, overran)
    watchdog.daemon = True
    watchdog.start()
    run = {"produce": produce, "consume": consume}[mode]
    try:
        summary = run(servers.split(","), int(count), prefix, json.loads(config))
    except Exception as error:
        say({"exception": describe(error)})
        summary = {}
    say({"done": summary})
    # Exits even if a client left a thread behind.
    os._exit(0)


main()
