// Crash recovery of a consumer process: a worker (worker.mjs, a child Node
// process) processes a load of orders from a durable pull consumer with
// explicit acks; it is killed with SIGKILL in the middle of the load and
// started again. Nothing may be lost: what was not acknowledged is
// redelivered, and the idempotent handler (deduplicating by stream sequence)
// applies every order exactly once.

import { describe, it, after } from "node:test";
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { AckPolicy, JSONCodec } from "nats";
import { LIMIT, NATS_URL, eventually, nanos, setupConnection } from "./helpers.mjs";

const STREAM = "FULFILLMENT";
const CONSUMER = "fulfiller";
const ORDERS = 1500;
const ACK_WAIT_MS = 2000;

const ctx = setupConnection("cairn-node-consumer-crash", [STREAM]);
const jc = JSONCodec();
const here = path.dirname(fileURLToPath(import.meta.url));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cairn-node-worker-"));
const DB = path.join(dir, "applied.jsonl");
const LOG = path.join(dir, "deliveries.jsonl");
const workers = new Set();

after(() => {
  for (const w of workers) w.kill("SIGKILL");
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Starts a worker process and waits until it is consuming. */
async function startWorker() {
  const child = fork(path.join(here, "worker.mjs"), [], {
    env: { ...process.env, NATS_URL, WORKER_STREAM: STREAM, WORKER_CONSUMER: CONSUMER, WORKER_DB: DB, WORKER_LOG: LOG },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  workers.add(child);
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => {
    workers.delete(child);
    resolve({ code, signal });
  }));
  let timer;
  const ready = await Promise.race([
    new Promise((resolve) => child.once("message", resolve)),
    exited.then((e) => assert.fail(`worker exited before it was ready: ${JSON.stringify(e)}`)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error("worker not ready after 10 s")), 10_000);
    }),
  ]).finally(() => clearTimeout(timer));
  assert.equal(ready.ready, true);
  return { child, exited, ready };
}

const readLines = (file) =>
  fs.existsSync(file)
    ? fs.readFileSync(file, "utf8").split("\n").filter((l) => l.endsWith("}")).map((l) => JSON.parse(l))
    : [];
const appliedCount = () => (fs.existsSync(DB) ? fs.readFileSync(DB, "utf8").split("\n").length - 1 : 0);

describe("a consumer process killed in the middle of a load", () => {
  it("loses nothing, redelivers what was not acknowledged, and applies each order once", LIMIT, async () => {
    await ctx.jsm.streams.add({ name: STREAM, subjects: ["fulfillment.orders.>"] });
    await ctx.jsm.consumers.add(STREAM, {
      durable_name: CONSUMER,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ACK_WAIT_MS),
    });

    // The first worker starts, then the load arrives.
    const first = await startWorker();
    assert.equal(first.ready.known, 0);
    const seqOf = new Map(); // order id -> stream seq
    const publishing = (async () => {
      const window = 50;
      for (let i = 0; i < ORDERS; i += window) {
        const ids = [];
        for (let j = i; j < Math.min(ORDERS, i + window); j++) ids.push(`f-${j + 1}`);
        const acks = await Promise.all(
          ids.map((id) => ctx.js.publish("fulfillment.orders.new", jc.encode({ id, items: 3 }), { msgID: id })),
        );
        acks.forEach((pa, k) => seqOf.set(ids[k], pa.seq));
      }
    })();

    // Kill it with SIGKILL once about a quarter of the orders are applied.
    await eventually("the first worker to apply 400 orders", () => appliedCount() >= 400, 10_000, 5);
    first.child.kill("SIGKILL");
    const died = await first.exited;
    assert.equal(died.signal, "SIGKILL");
    const atKill = appliedCount();
    assert.ok(atKill < ORDERS, `the kill came after the whole load (${atKill} applied)`);

    // The server still holds what was delivered to the dead worker but not acknowledged.
    const stranded = await ctx.jsm.consumers.info(STREAM, CONSUMER);
    assert.ok(stranded.num_ack_pending > 0, `num_ack_pending ${stranded.num_ack_pending} after the kill`);

    // A new worker picks up where the first left off.
    const second = await startWorker();
    assert.ok(second.ready.known >= atKill - 1, `the new worker loaded ${second.ready.known} applied orders, ${atKill} were written`);
    await publishing;
    await eventually(
      "every order to be applied and acknowledged",
      async () => {
        if (appliedCount() < ORDERS) return false;
        const i = await ctx.jsm.consumers.info(STREAM, CONSUMER);
        return i.num_pending === 0 && i.num_ack_pending === 0;
      },
      12_000,
    );
    second.child.send("stop");
    const stopped = await second.exited;
    assert.deepEqual(stopped, { code: 0, signal: null });

    // Every order applied exactly once, none missing.
    const applied = readLines(DB);
    const ids = applied.map((a) => a.id);
    assert.equal(new Set(ids).size, ids.length, "an order was applied twice");
    assert.equal(ids.length, ORDERS);
    const want = Array.from({ length: ORDERS }, (_, i) => `f-${i + 1}`);
    assert.deepEqual([...ids].sort(), [...want].sort());
    for (const a of applied) assert.equal(a.key, `${STREAM}:${seqOf.get(a.id)}`);

    // What the dead worker had not acknowledged came again to the new one,
    // marked as a redelivery. (The first worker may have seen redeliveries
    // too before it died: on a loaded machine a message it buffered can
    // wait past the 2 s ack wait, and the server then sends it again, as
    // nats-server does.)
    const deliveries = readLines(LOG);
    const redelivered = deliveries.filter((d) => d.count > 1);
    assert.ok(redelivered.some((d) => d.pid === second.ready.pid), "nothing was redelivered to the new worker after the kill");
    assert.equal(new Set(deliveries.map((d) => d.key)).size, ORDERS);
    const info = await ctx.jsm.consumers.info(STREAM, CONSUMER);
    assert.equal(info.delivered.stream_seq, ORDERS);
    assert.equal(info.ack_floor.stream_seq, ORDERS);
    // Consumer sequences count every delivery, including the ones that died
    // unlogged in the killed worker's buffer.
    assert.ok(info.delivered.consumer_seq >= deliveries.length, `consumer seq ${info.delivered.consumer_seq}, ${deliveries.length} deliveries`);
    assert.ok(info.delivered.consumer_seq >= ORDERS + redelivered.length);
    console.log(
      `crash recovery: killed after ${atKill} applied; ${stranded.num_ack_pending} unacknowledged at the kill; ` +
        `${redelivered.length} redeliveries, ${deliveries.filter((d) => d.dup).length} of them already applied; ` +
        `${deliveries.length} deliveries for ${ORDERS} orders`,
    );
  });
});
