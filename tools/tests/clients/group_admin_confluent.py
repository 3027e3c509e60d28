"""confluent-kafka's AdminClient on consumer groups (docs/clients.md, "Consumer groups"):
  list HOST:PORT,... _ GROUP    prints {"listed": [[group, state], ...]}, then
                                {"described": [group, state, members]} for GROUP, then
                                {"deleted": GROUP or error}, then {"done": 1}
Bounded: 30 s per call; a failure prints {"failed": why} and exits 1."""
import json
import sys

from confluent_kafka.admin import AdminClient

MODE, SERVERS, _, GROUP = sys.argv[1:5]


def say(event):
    print(json.dumps(event), flush=True)


admin = AdminClient({"bootstrap.servers": SERVERS})
try:
    listed = admin.list_consumer_groups(request_timeout=30).result()
    say({"listed": sorted([g.group_id, str(g.state).split(".")[-1]] for g in listed.valid)})
    described = admin.describe_consumer_groups([GROUP], request_timeout=30)[GROUP].result()
    say({"described": [described.group_id, str(described.state).split(".")[-1],
                       len(described.members)]})
    try:
        admin.delete_consumer_groups([GROUP], request_timeout=30)[GROUP].result()
        say({"deleted": GROUP})
    except Exception as e:  # the error is part of what the test checks
        say({"deleted": str(e)})
except Exception as e:
    say({"failed": repr(e)})
    sys.exit(1)
say({"done": 1})
