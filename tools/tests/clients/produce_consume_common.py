"""What produce_consume_confluent.py and produce_consume_kafka_python.py share: the arguments
(HOST:PORT,... COUNT PREFIX), the JSON event lines they print ({"acked": [offset, value]},
{"failed": [value, error]}, {"consumed": [offset, value]}, then {"done": ...}), and the run: a
consumer thread reads while the producer sends, then the script waits (at most 60 s) until every
acknowledged record was consumed."""
import json
import sys
import threading
import time

TOPIC = "__cluster_metadata"
SERVERS, COUNT, PREFIX = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
acked, consumed = set(), set()
finished = threading.Event()


def say(event):
    with lock:
        print(json.dumps(event), flush=True)


def on_acked(offset, value):
    acked.add(value)
    say({"acked": [offset, value]})


def on_failed(value, error):
    say({"failed": [value, error]})


def on_consumed(offset, value):
    consumed.add(value)
    say({"consumed": [offset, value]})


def run(consume, produce):
    """Runs `consume` (which polls until `finished` is set) on a thread while `produce` sends,
    then waits for the consumer to have read every acknowledged record."""
    reader = threading.Thread(target=consume)
    reader.start()
    produce()
    deadline = time.time() + 60
    while time.time() < deadline and not acked <= consumed:
        time.sleep(0.1)
    finished.set()
    reader.join(timeout=20)
    say({"done": {"acked": len(acked), "consumed": len(consumed & acked)}})
