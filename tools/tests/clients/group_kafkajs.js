// kafkajs 2 in a consumer group (docs/clients.md, "Consumer groups"):
//   node group_kafkajs.js consume HOST:PORT,... TAKE GROUP
// subscribes to __cluster_metadata from the beginning in GROUP (the offsets of the records it
// prints are committed after each batch), prints {"consumed": [offset, value]} per record until TAKE, disconnects (which
// commits and leaves), prints {"done": 1}. Bounded: 60 s, then {"failed": why} and exit 1.
const { Kafka, logLevel } = require("kafkajs");

const [, , mode, servers, take, group] = process.argv;
const say = (event) => console.log(JSON.stringify(event));

async function main() {
  const kafka = new Kafka({ clientId: "ringraft-test", brokers: servers.split(","),
                            logLevel: logLevel.ERROR });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000,
                                    heartbeatInterval: 1000 });
  await consumer.connect();
  await consumer.subscribe({ topic: "__cluster_metadata", fromBeginning: true });
  let taken = 0;
  let finished;
  const done = new Promise((resolve) => { finished = resolve; });
  // Offsets are resolved (and so committed) only for the records printed: none past TAKE.
  await consumer.run({
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary }) => {
      for (const message of batch.messages) {
        if (taken >= Number(take)) break;
        say({ consumed: [Number(message.offset), message.value.toString()] });
        taken += 1;
        resolveOffset(message.offset);
      }
      await commitOffsetsIfNecessary();
      if (taken >= Number(take)) finished();
    },
  });
  const timer = setTimeout(() => { say({ failed: `read ${taken} of ${take} within 60 s` });
                                    process.exit(1); }, 60000);
  await done;
  clearTimeout(timer);
  await consumer.disconnect();
  say({ done: 1 });
}

if (mode !== "consume") {
  say({ failed: `unknown mode ${mode}` });
  process.exit(1);
}
main().catch((e) => { say({ failed: String(e) }); process.exit(1); });
