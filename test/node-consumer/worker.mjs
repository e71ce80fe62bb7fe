// An order-fulfilment worker: a separate Node process that
// crash.test.mjs starts, kills with SIGKILL in the middle of the load, and
// starts again. It is not a test file itself.
//
//   NATS_URL=… WORKER_STREAM=… WORKER_CONSUMER=… WORKER_DB=<file> WORKER_LOG=<file> node worker.mjs
//
// It consumes the durable pull consumer with explicit acks. Its "database"
// is WORKER_DB, an append-only file with one JSON line per applied order,
// written before the ack. The handler is idempotent: it deduplicates by
// stream and stream sequence ("<stream>:<seq>"), loading what was already
// applied when it starts, so a message redelivered after a crash (applied
// but not acknowledged) is acknowledged without being applied again.
// WORKER_LOG gets one line per delivery, for the test to inspect.
// On an IPC "stop" message it stops consuming, drains and exits 0.

import fs from "node:fs";
import { connect } from "nats";

const { NATS_URL, WORKER_STREAM, WORKER_CONSUMER, WORKER_DB, WORKER_LOG } = process.env;
if (!NATS_URL || !WORKER_STREAM || !WORKER_CONSUMER || !WORKER_DB || !WORKER_LOG) {
  console.error("worker.mjs: set NATS_URL, WORKER_STREAM, WORKER_CONSUMER, WORKER_DB and WORKER_LOG");
  process.exit(2);
}

// Load what was applied before. A kill can leave a torn last line: drop it
// (its message was not acknowledged, so it comes again).
let text = fs.existsSync(WORKER_DB) ? fs.readFileSync(WORKER_DB, "utf8") : "";
if (text !== "" && !text.endsWith("\n")) {
  text = text.slice(0, text.lastIndexOf("\n") + 1);
  fs.truncateSync(WORKER_DB, Buffer.byteLength(text));
}
const applied = new Set(
  text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line).key),
);
const db = fs.openSync(WORKER_DB, "a");
const log = fs.openSync(WORKER_LOG, "a");

const nc = await connect({ servers: NATS_URL, name: `order-worker-${process.pid}` });
const js = nc.jetstream();
const consumer = await js.consumers.get(WORKER_STREAM, WORKER_CONSUMER);
const messages = await consumer.consume({ max_messages: 50 });

process.on("message", (m) => {
  if (m === "stop") messages.stop();
});
process.send?.({ ready: true, pid: process.pid, known: applied.size });

for await (const m of messages) {
  const key = `${m.info.stream}:${m.seq}`;
  const dup = applied.has(key);
  fs.writeSync(log, `${JSON.stringify({ pid: process.pid, key, count: m.info.redeliveryCount, dup })}\n`);
  if (!dup) {
    const order = m.json();
    await new Promise((resolve) => setTimeout(resolve, 1)); // the actual work
    fs.writeSync(db, `${JSON.stringify({ key, id: order.id })}\n`); // commit the effect…
    applied.add(key);
  }
  m.ack(); // …then acknowledge
}

await nc.drain();
fs.closeSync(db);
fs.closeSync(log);
process.exit(0);
