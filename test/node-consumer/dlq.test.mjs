// The dead-letter subject cairn adds to the order-processing consumer of
// orders.test.mjs, with the unmodified Node.js `nats` client (2.29.3): the
// stream's metadata names `cairn.dead_letter_subject`, and a poison order
// that used up max_deliver (5 deliveries, each nak()'ed) arrives in a DLQ
// stream with headers naming where it came from, while the work-queue
// stream releases it. An order the handler rejects with term() goes the
// same way at once. (docs/dead-letter.md)
//
// nats-server v2.15.2 has no dead-letter subject (it only sends the
// MAX_DELIVERIES advisory): against it, every test here is skipped. The
// probe: cairn refuses an invalid dead-letter subject at stream create,
// nats-server stores any metadata.
//
// The tests run in order and share the SHOP and DLQ streams.

import { describe, it, before } from "node:test";
import assert from "node:assert/strict";
import { AckPolicy, DeliverPolicy, JSONCodec, RetentionPolicy, StorageType } from "nats";
import { LIMIT, collect, delay, errCode, eventually, nanos } from "./helpers.mjs";
import { setupConnection, deleteStreamIfExists } from "./helpers.mjs";

const STREAM = "SHOP";
const DLQ = "DLQ";
const DEAD_LETTER_KEY = "cairn.dead_letter_subject";
const ctx = setupConnection("cairn-node-consumer-dlq", [STREAM, DLQ]);
const jc = JSONCodec();

// Whether the server has dead-letter subjects (cairn): set by the probe.
let supported = false;
const skipUnlessSupported = (t) => {
  if (!supported) t.skip("the server has no dead-letter subject (nats-server)");
  return !supported;
};

describe("SHOP: poison orders go to a dead-letter stream", () => {
  before(async () => {
    const probe = `DLQPROBE_${ctx.sentinel}`;
    try {
      await ctx.jsm.streams.add({ name: probe, subjects: [`probe.${ctx.sentinel}`], metadata: { [DEAD_LETTER_KEY]: "not a subject*" } });
      await deleteStreamIfExists(ctx.jsm, probe);
    } catch (err) {
      assert.equal(errCode(err), 10052, `${err.message}`);
      assert.match(err.message, /cairn\.dead_letter_subject/);
      supported = true;
    }
  });

  it("refuses a dead-letter subject the stream itself captures (a loop)", LIMIT, async (t) => {
    if (skipUnlessSupported(t)) return;
    await assert.rejects(
      ctx.jsm.streams.add({ name: STREAM, subjects: ["shop.orders.>"], metadata: { [DEAD_LETTER_KEY]: "shop.orders.dead" } }),
      (err) => {
        assert.equal(errCode(err), 10052, `${err.message}`);
        assert.match(err.message, /captured by stream SHOP itself/i);
        return true;
      },
    );
  });

  it("creates a DLQ stream and a work-queue SHOP stream whose metadata names the dead-letter subject", LIMIT, async (t) => {
    if (skipUnlessSupported(t)) return;
    const dlq = await ctx.jsm.streams.add({ name: DLQ, subjects: ["dlq.>"], storage: StorageType.File });
    assert.deepEqual(dlq.config.subjects, ["dlq.>"]);
    const si = await ctx.jsm.streams.add({
      name: STREAM,
      subjects: ["shop.orders.>"],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      metadata: { [DEAD_LETTER_KEY]: "dlq.shop.orders" },
    });
    assert.equal(si.config.metadata[DEAD_LETTER_KEY], "dlq.shop.orders");
  });

  it("moves the poison order to DLQ after max_deliver (5) nak()s, and a term()'ed order at once", LIMIT, async (t) => {
    if (skipUnlessSupported(t)) return;
    await ctx.jsm.consumers.add(STREAM, {
      durable_name: "order-processor",
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      max_deliver: 5,
      ack_wait: nanos(30_000),
    });

    // o-1..o-3 are fine, o-4 can never be processed (poison), o-5 is invalid.
    const seqs = {};
    for (const n of [1, 2, 3, 4, 5]) {
      const order = { id: `o-${n}`, amount: n };
      if (n === 4) order.poison = true;
      if (n === 5) order.invalid = true;
      const pa = await ctx.js.publish("shop.orders.created", jc.encode(order), { msgID: `o-${n}` });
      seqs[order.id] = pa.seq;
    }

    const advisories = [];
    const adv = ctx.nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${STREAM}.order-processor`, {
      callback: (err, m) => {
        if (!err) advisories.push(m.json());
      },
    });
    await ctx.nc.flush();

    // The application of orders.test.mjs: ack on success, nak() on failure,
    // term() for an order that can never be valid.
    const attempts = new Map();
    const consumer = await ctx.js.consumers.get(STREAM, "order-processor");
    const messages = await consumer.consume({ max_messages: 10 });
    let done = 0;
    for await (const m of messages) {
      const order = m.json();
      attempts.set(order.id, (attempts.get(order.id) ?? 0) + 1);
      await delay(1);
      if (order.invalid) {
        m.term("invalid order");
        done++;
      } else if (order.poison) {
        m.nak();
        if (attempts.get(order.id) === 5) done++;
      } else {
        m.ack();
        done++;
      }
      if (done === 5) break;
    }
    assert.equal(attempts.get("o-4"), 5);
    assert.equal(attempts.get("o-5"), 1);

    // Both arrive in DLQ, stored once each.
    const dlqInfo = await eventually("two dead letters in DLQ", async () => {
      const si = await ctx.jsm.streams.info(DLQ);
      return si.state.messages === 2 ? si : null;
    });
    assert.equal(dlqInfo.state.messages, 2);
    const dead = {};
    for (const seq of [1, 2]) {
      const sm = await ctx.jsm.streams.getMessage(DLQ, { seq });
      assert.equal(sm.subject, "dlq.shop.orders");
      dead[sm.json().id] = sm;
    }
    assert.deepEqual(Object.keys(dead).sort(), ["o-4", "o-5"]);
    const expect = {
      "o-4": { reason: "max_deliver", deliveries: "5" },
      "o-5": { reason: "term", deliveries: "1" },
    };
    for (const [id, want] of Object.entries(expect)) {
      const h = dead[id].header;
      assert.equal(h.get("Cairn-Dlq-Stream"), STREAM);
      assert.equal(h.get("Cairn-Dlq-Consumer"), "order-processor");
      assert.equal(h.get("Cairn-Dlq-Sequence"), String(seqs[id]));
      assert.equal(h.get("Cairn-Dlq-Subject"), "shop.orders.created");
      assert.equal(h.get("Cairn-Dlq-Deliveries"), want.deliveries);
      assert.equal(h.get("Cairn-Dlq-Reason"), want.reason);
      assert.ok(!Number.isNaN(Date.parse(h.get("Cairn-Dlq-Time-Stamp"))), h.get("Cairn-Dlq-Time-Stamp"));
      // The original's Nats-Msg-Id is kept aside; the copy's is <stream>.<consumer>.<seq>.
      assert.equal(h.get("Cairn-Dlq-Msg-Id"), id);
      assert.equal(h.get("Nats-Msg-Id"), `${STREAM}.order-processor.${seqs[id]}`);
    }
    assert.deepEqual(dead["o-4"].json(), { id: "o-4", amount: 4, poison: true });

    // The advisory still names the dead letter.
    await eventually("the max_deliver advisory", () => advisories.length > 0, 5000);
    adv.unsubscribe();
    assert.equal(advisories[0].stream_seq, seqs["o-4"]);
    assert.equal(advisories[0].deliveries, 5);

    // The work queue released everything: processed, or moved to DLQ.
    const si = await eventually("SHOP to be empty", async () => {
      const i = await ctx.jsm.streams.info(STREAM);
      return i.state.messages === 0 ? i : null;
    });
    assert.equal(si.state.last_seq, seqs["o-5"]);
    const ci = await consumer.info();
    assert.equal(ci.num_ack_pending, 0);
    assert.equal(ci.num_pending, 0);
  });

  it("reads the dead letters back with a DLQ consumer", LIMIT, async (t) => {
    if (skipUnlessSupported(t)) return;
    const dlq = await ctx.js.consumers.get(DLQ); // an ordered consumer
    const got = [];
    const messages = await dlq.consume();
    for await (const m of messages) {
      got.push(`${m.headers.get("Cairn-Dlq-Reason")}:${m.json().id}`);
      if (m.info.pending === 0) break;
    }
    assert.deepEqual(got.sort(), ["max_deliver:o-4", "term:o-5"]);
    const names = await collect(ctx.jsm.streams.names());
    assert.ok(names.includes(DLQ));
  });
});
