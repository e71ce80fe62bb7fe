// JetStream stream tests driven by the unmodified Node.js `nats` client
// (2.29.3): nc.jetstreamManager() for the stream API and nc.jetstream() for
// publishing (issue 4).
//
// They run against whatever server NATS_URL points at, which must have
// JetStream enabled: cairn -js in CI (scripts/test.sh starts one), or
// nats-server -js v2.15.2 to check that the tests encode nats-server's
// behaviour. The server is shared with the other test files, so every
// stream made here is deleted again, and account-wide numbers are compared
// as differences.

import { describe, it, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import {
  connect,
  headers,
  nuid,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  StringCodec,
} from "nats";

const NATS_URL = process.env.NATS_URL;
if (!NATS_URL) {
  console.error(
    "streams.test.mjs: NATS_URL is not set; point it at a server with JetStream, " +
      "e.g. NATS_URL=nats://127.0.0.1:4222 npm test",
  );
  process.exit(2);
}

const sc = StringCodec();
const enc = (s) => sc.encode(s);
const dec = (b) => sc.decode(b);

// ---------------------------------------------------------------------------
// helpers

let nc; // one connection for the whole file
let jsm;
let js;
const made = new Set(); // streams to delete after each test

// A stream that lives for the whole file. (nats-server v2.15.2 removes the
// account's stream directory when its last stream is deleted, and a create
// racing with that removal fails with "error creating store for stream";
// keeping one stream around avoids that race when checking the tests
// against nats-server.)
const SENTINEL = `SENTINEL_${nuid.next().slice(-8).toUpperCase()}`;

before(async () => {
  nc = await connect({ servers: NATS_URL, name: "cairn-node-streams", reconnect: false, timeout: 5000 });
  jsm = await nc.jetstreamManager();
  js = nc.jetstream();
  await jsm.streams.add({ name: SENTINEL, subjects: [`sentinel.${SENTINEL}`] });
});

after(async () => {
  if (jsm) await jsm.streams.delete(SENTINEL);
  if (nc && !nc.isClosed()) {
    await nc.close();
  }
});

afterEach(async () => {
  for (const name of made) {
    try {
      await jsm.streams.delete(name);
    } catch (err) {
      if (err.api_error?.err_code !== 10059) throw err;
    }
  }
  made.clear();
});

/** Adds a stream and remembers to delete it. */
async function addStream(cfg) {
  made.add(cfg.name);
  return await jsm.streams.add(cfg);
}

/** A unique token for stream names and subjects in this run. */
const uniq = () => nuid.next().slice(-8).toUpperCase();

/** Asserts that p rejects with a JetStream API error. */
async function rejectsAPI(p, code, errCode, desc) {
  let err;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `want API error ${errCode}, got success`);
  const ae = err.api_error;
  assert.ok(ae, `want API error ${errCode}, got ${err.code}: ${err.message}`);
  assert.equal(ae.err_code, errCode, `err_code (${ae.description})`);
  assert.equal(ae.code, code, "code");
  if (desc !== undefined) assert.equal(ae.description, desc, "description");
  return err;
}

/** A raw $JS.API request: the decoded JSON reply. */
async function api(subject, body = "") {
  const m = await nc.request(subject, typeof body === "string" ? enc(body) : body, { timeout: 5000 });
  return JSON.parse(dec(m.data));
}

const userMetadata = (md = {}) =>
  Object.fromEntries(Object.entries(md).filter(([k]) => !k.startsWith("_nats.")));

async function collect(lister) {
  const out = [];
  for await (const v of lister) out.push(v);
  return out;
}

// ---------------------------------------------------------------------------

describe("stream management", () => {
  it("adds ORDERS with the server's defaults filled in", async () => {
    const si = await addStream({ name: "ORDERS", subjects: ["events.orders.>"] });
    const c = si.config;
    assert.equal(c.name, "ORDERS");
    assert.deepEqual(c.subjects, ["events.orders.>"]);
    assert.equal(c.retention, RetentionPolicy.Limits);
    assert.equal(c.storage, StorageType.File);
    assert.equal(c.discard, DiscardPolicy.Old);
    assert.equal(c.max_msgs, -1);
    assert.equal(c.max_bytes, -1);
    assert.equal(c.max_age, 0);
    assert.equal(c.max_msgs_per_subject, -1);
    assert.equal(c.max_msg_size, -1);
    assert.equal(c.max_consumers, -1);
    assert.equal(c.num_replicas, 1);
    assert.equal(c.duplicate_window, 120_000_000_000);
    assert.equal(c.sealed, false);
    assert.equal(c.deny_delete, false);
    assert.equal(c.deny_purge, false);
    assert.equal(c.allow_rollup_hdrs, false);
    assert.deepEqual(userMetadata(c.metadata), {});
    assert.equal(si.state.messages, 0);
    assert.equal(si.state.first_seq, 0);
    assert.equal(si.state.last_seq, 0);
    assert.ok(Math.abs(Date.parse(si.created) - Date.now()) < 60_000, `created ${si.created}`);

    // Same config again: fine. Another config under the same name: 10058.
    await jsm.streams.add({ name: "ORDERS", subjects: ["events.orders.>"] });
    await rejectsAPI(
      jsm.streams.add({ name: "ORDERS", subjects: ["events.orders.>"], max_msgs: 5 }),
      400,
      10058,
      "stream name already in use with a different configuration",
    );
    const s = await jsm.streams.get("ORDERS");
    assert.equal(s.name, "ORDERS");
    assert.equal((await s.info()).config.max_msgs, -1);
  });

  it("accepts every retention, storage, limit and flag", async () => {
    const u = uniq();
    const cases = [
      { name: `LIM_${u}`, subjects: [`cfg.${u}.lim.>`], retention: RetentionPolicy.Limits, storage: StorageType.File },
      { name: `INT_${u}`, subjects: [`cfg.${u}.int.>`], retention: RetentionPolicy.Interest, storage: StorageType.Memory },
      { name: `WQ_${u}`, subjects: [`cfg.${u}.wq.>`], retention: RetentionPolicy.Workqueue },
      {
        name: `ALL_${u}`,
        subjects: [`cfg.${u}.all.>`],
        description: "every limit",
        max_msgs: 100,
        max_bytes: 1 << 20,
        max_age: 3_600_000_000_000,
        max_msg_size: 2048,
        max_msgs_per_subject: 5,
        max_consumers: 3,
        discard: DiscardPolicy.New,
        discard_new_per_subject: true,
        duplicate_window: 60_000_000_000,
        allow_rollup_hdrs: true,
        deny_delete: true,
        metadata: { owner: "node" },
        storage: StorageType.Memory,
      },
      { name: `DP_${u}`, subjects: [`cfg.${u}.dp`], deny_purge: true },
    ];
    for (const cfg of cases) {
      const si = await addStream(cfg);
      for (const [k, v] of Object.entries(cfg)) {
        if (k === "metadata") assert.deepEqual(userMetadata(si.config.metadata), v, `${cfg.name} metadata`);
        else assert.deepEqual(si.config[k], v, `${cfg.name} ${k}`);
      }
      const info = await jsm.streams.info(cfg.name);
      assert.deepEqual(info.config, si.config, `${cfg.name}: info and create agree`);
    }
    // duplicate_window follows a shorter max_age.
    const si = await addStream({ name: `AGE_${u}`, subjects: [`cfg.${u}.age`], max_age: 30_000_000_000 });
    assert.equal(si.config.duplicate_window, 30_000_000_000);
  });

  it("refuses invalid configurations with nats-server's errors", async () => {
    const u = uniq();
    await addStream({ name: `BASE_${u}`, subjects: [`inv.${u}.>`] });
    await rejectsAPI(
      jsm.streams.add({ name: `R3_${u}`, num_replicas: 3 }),
      500,
      10074,
      "replicas > 1 not supported in non-clustered mode",
    );
    await rejectsAPI(
      jsm.streams.add({ name: `OVL_${u}`, subjects: [`inv.${u}.x`] }),
      400,
      10065,
      "subjects overlap with an existing stream",
    );
    await rejectsAPI(
      jsm.streams.add({ name: `AGE_${u}`, max_age: 1_000_000 }),
      500,
      10052,
      "max age needs to be >= 100ms",
    );
    await rejectsAPI(
      jsm.streams.add({ name: `RP_${u}`, deny_purge: true, allow_rollup_hdrs: true }),
      500,
      10052,
      "roll-ups require the purge permission",
    );
    // The client checks names itself; raw requests reach the server.
    let r = await api(`$JS.API.STREAM.CREATE.BAD_${u}`, `{"name":"BAD_${u}",`);
    assert.equal(r.error?.err_code, 10025, JSON.stringify(r));
    assert.equal(r.error.code, 400);
    assert.match(r.error.description, /^invalid JSON/);
    r = await api(`$JS.API.STREAM.CREATE.a*${u}`, `{"name":"a*${u}"}`);
    assert.equal(r.error?.err_code, 10052, JSON.stringify(r));
    r = await api(`$JS.API.STREAM.CREATE.A_${u}`, `{"name":"B_${u}"}`);
    assert.equal(r.error?.err_code, 10056, JSON.stringify(r));
    assert.equal(r.type, "io.nats.jetstream.api.v1.stream_create_response");
    const names = await collect(jsm.streams.names());
    assert.ok(!names.some((n) => n.endsWith(u) && n !== `BASE_${u}`), `refused streams exist: ${names}`);
  });

  it("lists and names streams across pages, and filters by subject", async () => {
    const u = uniq();
    const n = 260; // more than one STREAM.LIST page (256)
    const want = [];
    for (let i = 0; i < n; i++) {
      const name = `L${u}_${String(i).padStart(3, "0")}`;
      want.push(name);
      await addStream({ name, subjects: [`list.${u}.${i}.*`], storage: StorageType.Memory, description: `d${i}` });
    }
    const names = (await collect(jsm.streams.names())).filter((x) => x.startsWith(`L${u}_`));
    assert.deepEqual(names, want, "names (sorted, all pages)");
    const infos = (await collect(jsm.streams.list())).filter((si) => si.config.name.startsWith(`L${u}_`));
    assert.deepEqual(infos.map((si) => si.config.name), want, "list (sorted, all pages)");
    for (const si of infos) {
      assert.equal(si.config.description, `d${Number(si.config.name.slice(-3))}`);
      assert.equal(si.state.messages, 0);
    }
    assert.deepEqual(await collect(jsm.streams.names(`list.${u}.42.x`)), [`L${u}_042`]);
    assert.equal((await collect(jsm.streams.list(`list.${u}.*.x`))).length, n);
    assert.deepEqual(await collect(jsm.streams.names(`nothing.${u}`)), []);
    assert.equal(await jsm.streams.find(`list.${u}.7.y`), `L${u}_007`);
  });

  it("reports subject and deleted details in info", async () => {
    const u = uniq();
    const name = `INFO_${u}`;
    await addStream({ name, subjects: [`info.${u}.>`] });
    const subs = ["a", "b", "a", "c", "a", "b"];
    for (const s of subs) await js.publish(`info.${u}.${s}`, enc(s));
    await jsm.streams.deleteMessage(name, 2);
    await jsm.streams.deleteMessage(name, 4);
    let si = await jsm.streams.info(name);
    assert.equal(si.state.messages, 4);
    assert.equal(si.state.first_seq, 1);
    assert.equal(si.state.last_seq, 6);
    assert.equal(si.state.num_deleted, 2);
    assert.equal(si.state.num_subjects, 2);
    assert.equal(si.state.subjects, undefined);
    assert.equal(si.state.deleted, undefined);
    si = await jsm.streams.info(name, { subjects_filter: ">", deleted_details: true });
    assert.deepEqual(si.state.subjects, { [`info.${u}.a`]: 3, [`info.${u}.b`]: 1 });
    assert.deepEqual(si.state.deleted, [2, 4]);
    si = await jsm.streams.info(name, { subjects_filter: `info.${u}.b` });
    assert.deepEqual(si.state.subjects, { [`info.${u}.b`]: 1 });
    await rejectsAPI(jsm.streams.info(`NOPE_${u}`), 404, 10059, "stream not found");
  });

  it("updates what may change and refuses the rest", async () => {
    const u = uniq();
    const name = `UPD_${u}`;
    await addStream({ name, subjects: [`upd.${u}.>`], max_msgs: 10, deny_delete: true });
    for (let i = 1; i <= 6; i++) await js.publish(`upd.${u}.x`, enc(`${i}`));

    const si = await jsm.streams.update(name, {
      description: "changed",
      max_msgs: 4,
      subjects: [`upd.${u}.>`, `upd2.${u}`],
      metadata: { k: "v" },
    });
    assert.equal(si.config.description, "changed");
    assert.equal(si.config.max_msgs, 4);
    assert.deepEqual(si.config.subjects, [`upd.${u}.>`, `upd2.${u}`]);
    assert.deepEqual(userMetadata(si.config.metadata), { k: "v" });
    assert.equal(si.state.messages, 4, "a smaller max_msgs trims at once");
    assert.equal(si.state.first_seq, 3);
    const pa = await js.publish(`upd2.${u}`, enc("new subject"));
    assert.equal(pa.seq, 7);

    await rejectsAPI(
      jsm.streams.update(name, { storage: StorageType.Memory }),
      500,
      10052,
      "stream configuration update can not change storage type",
    );
    await rejectsAPI(
      jsm.streams.update(name, { retention: RetentionPolicy.Workqueue }),
      500,
      10052,
      "stream configuration update can not change retention policy to/from workqueue",
    );
    await rejectsAPI(
      jsm.streams.update(name, { deny_delete: false }),
      500,
      10052,
      "stream configuration update can not cancel deny message deletes",
    );
    await rejectsAPI(
      jsm.streams.update(name, { num_replicas: 3 }),
      500,
      10074,
      "replicas > 1 not supported in non-clustered mode",
    );
    await rejectsAPI(jsm.streams.update(`NOPE_${u}`, { max_msgs: 1 }), 404, 10059, "stream not found");
    const after = await jsm.streams.info(name);
    assert.equal(after.config.storage, StorageType.File);
    assert.equal(after.config.retention, RetentionPolicy.Limits);
    assert.equal(after.config.deny_delete, true);
  });

  it("deletes streams", async () => {
    const u = uniq();
    const name = `DEL_${u}`;
    await addStream({ name, subjects: [`del.${u}`] });
    await js.publish(`del.${u}`, enc("x"));
    // ("{}" counts as empty; any other body is refused.)
    const r = await api(`$JS.API.STREAM.DELETE.${name}`, `{"x":1}`);
    assert.equal(r.error?.err_code, 10038, JSON.stringify(r));
    assert.equal(r.error.description, "expected an empty request payload");
    assert.equal(await jsm.streams.delete(name), true);
    await rejectsAPI(jsm.streams.info(name), 404, 10059, "stream not found");
    await rejectsAPI(jsm.streams.delete(name), 404, 10059, "stream not found");
    // Its subject is free again.
    await assert.rejects(js.publish(`del.${u}`, enc("x")), (err) => err.code === "503");
  });

  it("purges all, by subject, keeping N and up to a sequence", async () => {
    const u = uniq();
    const name = `PURGE_${u}`;
    await addStream({ name, subjects: [`purge.${u}.*`] });
    const fill = async (n) => {
      for (let i = 1; i <= n; i++) await js.publish(`purge.${u}.${i % 2 ? "a" : "b"}`, enc(`${i}`));
    };
    await fill(10); // a: 1 3 5 7 9, b: 2 4 6 8 10

    let r = await jsm.streams.purge(name, { filter: `purge.${u}.a` });
    assert.deepEqual([r.success, r.purged], [true, 5]);
    r = await jsm.streams.purge(name, { filter: `purge.${u}.b`, keep: 2 });
    assert.equal(r.purged, 3);
    let si = await jsm.streams.info(name);
    assert.deepEqual([si.state.messages, si.state.first_seq, si.state.last_seq], [2, 8, 10]);
    r = await jsm.streams.purge(name);
    assert.equal(r.purged, 2);
    si = await jsm.streams.info(name);
    assert.deepEqual([si.state.messages, si.state.first_seq, si.state.last_seq], [0, 11, 10]);

    await fill(10); // seqs 11..20
    r = await jsm.streams.purge(name, { seq: 15 });
    assert.equal(r.purged, 4);
    r = await jsm.streams.purge(name, { keep: 3 });
    assert.equal(r.purged, 3);
    si = await jsm.streams.info(name);
    assert.deepEqual([si.state.messages, si.state.first_seq, si.state.last_seq], [3, 18, 20]);

    const np = `NOPURGE_${u}`;
    await addStream({ name: np, subjects: [`nopurge.${u}`], deny_purge: true });
    await rejectsAPI(jsm.streams.purge(np), 500, 10110, "stream purge not permitted");
    const bad = await api(`$JS.API.STREAM.PURGE.${name}`, `{"seq":5,"keep":1}`);
    assert.equal(bad.error?.err_code, 10003, JSON.stringify(bad));
  });

  it("gets and deletes single messages", async () => {
    const u = uniq();
    const name = `MSG_${u}`;
    await addStream({ name, subjects: [`msg.${u}.*`] });
    const h = headers();
    h.set("X-Order", "42");
    await js.publish(`msg.${u}.a`, enc("first"), { headers: h, msgID: "m1" });
    await js.publish(`msg.${u}.b`, enc("second"));
    await js.publish(`msg.${u}.a`, enc("third"));

    let sm = await jsm.streams.getMessage(name, { seq: 1 });
    assert.equal(sm.subject, `msg.${u}.a`);
    assert.equal(sm.seq, 1);
    assert.equal(sm.string(), "first");
    assert.equal(sm.header.get("X-Order"), "42");
    assert.equal(sm.header.get("Nats-Msg-Id"), "m1");
    assert.ok(Math.abs(sm.time.getTime() - Date.now()) < 60_000, `time ${sm.time}`);
    sm = await jsm.streams.getMessage(name, { last_by_subj: `msg.${u}.a` });
    assert.deepEqual([sm.seq, sm.string()], [3, "third"]);
    sm = await jsm.streams.getMessage(name, { next_by_subj: `msg.${u}.b`, seq: 1 });
    assert.equal(sm.seq, 2);
    await rejectsAPI(jsm.streams.getMessage(name, { seq: 99 }), 404, 10037, "no message found");
    const s = await jsm.streams.get(name);
    assert.equal((await s.getMessage({ seq: 2 })).string(), "second");

    assert.equal(await s.deleteMessage(2, false), true);
    await rejectsAPI(jsm.streams.getMessage(name, { seq: 2 }), 404, 10037, "no message found");
    await rejectsAPI(jsm.streams.deleteMessage(name, 2), 400, 10043, "sequence 2 not found");
    assert.equal(await jsm.streams.deleteMessage(name, 1), true);
    let si = await jsm.streams.info(name);
    assert.deepEqual([si.state.messages, si.state.first_seq, si.state.last_seq], [1, 3, 3]);
    // Below the first sequence nats-server answers "no message found".
    await rejectsAPI(jsm.streams.deleteMessage(name, 1), 500, 10057, "no message found");
    si = await jsm.streams.info(name);
    assert.equal(si.state.messages, 1);

    const nd = `NODEL_${u}`;
    await addStream({ name: nd, subjects: [`nodel.${u}`], deny_delete: true });
    await js.publish(`nodel.${u}`, enc("x"));
    await rejectsAPI(jsm.streams.deleteMessage(nd, 1), 500, 10057, "message delete not permitted");
  });

  it("reports usage in account info", async () => {
    const u = uniq();
    const before = await jsm.getAccountInfo();
    await addStream({ name: `AF_${u}`, subjects: [`acct.${u}.f`] });
    await addStream({ name: `AM_${u}`, subjects: [`acct.${u}.m`], storage: StorageType.Memory });
    for (let i = 0; i < 5; i++) {
      await js.publish(`acct.${u}.f`, enc("f".repeat(100)));
      await js.publish(`acct.${u}.m`, enc("m".repeat(100)));
    }
    const fi = await jsm.streams.info(`AF_${u}`);
    const mi = await jsm.streams.info(`AM_${u}`);
    const ai = await jsm.getAccountInfo();
    assert.equal(ai.streams, before.streams + 2);
    assert.equal(ai.storage - before.storage, fi.state.bytes);
    assert.equal(ai.memory - before.memory, mi.state.bytes);
    assert.ok(fi.state.bytes >= 500 && mi.state.bytes >= 500);
    assert.equal(ai.limits.max_streams, -1);
    assert.ok(ai.api.total > before.api.total);
  });
});

describe("publishing", () => {
  it("returns PubAcks and deduplicates by msgID", async () => {
    const u = uniq();
    const name = `PUB_${u}`;
    await addStream({ name, subjects: [`pub.${u}.>`] });
    let pa = await js.publish(`pub.${u}.a`, enc("1"));
    assert.deepEqual({ ...pa }, { stream: name, seq: 1, duplicate: false });
    pa = await js.publish(`pub.${u}.a`, enc("2"), { msgID: "x" });
    assert.deepEqual([pa.seq, pa.duplicate], [2, false]);
    pa = await js.publish(`pub.${u}.b`, enc("2 again"), { msgID: "x" });
    assert.deepEqual([pa.stream, pa.seq, pa.duplicate], [name, 2, true]);
    pa = await js.publish(`pub.${u}.a`, enc("3"), { msgID: "y" });
    assert.deepEqual([pa.seq, pa.duplicate], [3, false]);
    assert.equal(pa.domain, undefined);
    const si = await jsm.streams.info(name);
    assert.equal(si.state.messages, 3);

    // The PubAck bytes as nats-server writes them.
    const h = headers();
    h.set("Nats-Msg-Id", "x");
    const m = await nc.request(`pub.${u}.a`, enc("raw"), { headers: h, timeout: 5000 });
    assert.equal(dec(m.data), `{"stream":"${name}","seq":2,"duplicate": true}`);

    // Many publishes in flight at once.
    const acks = await Promise.all(Array.from({ length: 100 }, (_, i) => js.publish(`pub.${u}.many`, enc(`${i}`))));
    assert.deepEqual(
      acks.map((a) => a.seq).sort((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => 4 + i),
    );
  });

  it("enforces the expect options with nats-server's error codes", async () => {
    const u = uniq();
    const name = `EXP_${u}`;
    await addStream({ name, subjects: [`exp.${u}.*`] });
    let pa = await js.publish(`exp.${u}.a`, enc("1"), { msgID: "m1", expect: { streamName: name, lastSequence: 0 } });
    assert.equal(pa.seq, 1);
    await rejectsAPI(
      js.publish(`exp.${u}.a`, enc("x"), { expect: { streamName: "OTHER" } }),
      400,
      10060,
      "expected stream does not match",
    );
    await rejectsAPI(
      js.publish(`exp.${u}.a`, enc("x"), { expect: { lastSequence: 5 } }),
      400,
      10071,
      "wrong last sequence: 1",
    );
    pa = await js.publish(`exp.${u}.b`, enc("2"), { expect: { lastSubjectSequence: 0 } });
    assert.equal(pa.seq, 2);
    await rejectsAPI(
      js.publish(`exp.${u}.a`, enc("x"), { expect: { lastSubjectSequence: 2 } }),
      400,
      10071,
      "wrong last sequence: 1",
    );
    await rejectsAPI(
      js.publish(`exp.${u}.a`, enc("x"), { expect: { lastMsgID: "m1" } }),
      400,
      10070,
      "wrong last msg ID: ",
    );
    pa = await js.publish(`exp.${u}.a`, enc("3"), { msgID: "m3", expect: { lastSequence: 2, lastSubjectSequence: 1 } });
    assert.equal(pa.seq, 3);
    pa = await js.publish(`exp.${u}.a`, enc("4"), { expect: { lastMsgID: "m3" } });
    assert.equal(pa.seq, 4);
    const si = await jsm.streams.info(name);
    assert.deepEqual([si.state.messages, si.state.last_seq], [4, 4]);
  });

  it("rolls up with Nats-Rollup", async () => {
    const u = uniq();
    const name = `ROLL_${u}`;
    await addStream({ name, subjects: [`roll.${u}.*`], allow_rollup_hdrs: true });
    for (const s of ["a", "b", "a", "b", "a"]) await js.publish(`roll.${u}.${s}`, enc(s));
    const h = headers();
    h.set("Nats-Rollup", "sub");
    const pa = await js.publish(`roll.${u}.a`, enc("rolled"), { headers: h });
    assert.equal(pa.seq, 6);
    const si = await jsm.streams.info(name, { subjects_filter: ">" });
    assert.deepEqual(si.state.subjects, { [`roll.${u}.a`]: 1, [`roll.${u}.b`]: 2 });
    const all = headers();
    all.set("Nats-Rollup", "all");
    await js.publish(`roll.${u}.c`, enc("everything"), { headers: all });
    assert.equal((await jsm.streams.info(name)).state.messages, 1);

    const nr = `NOROLL_${u}`;
    await addStream({ name: nr, subjects: [`noroll.${u}`] });
    const h2 = headers();
    h2.set("Nats-Rollup", "sub");
    await rejectsAPI(js.publish(`noroll.${u}`, enc("x"), { headers: h2 }), 500, 10111, "rollup not permitted");
  });

  it("enforces limits with discard new", async () => {
    const u = uniq();
    const name = `LIM_${u}`;
    await addStream({ name, subjects: [`lim.${u}.*`], max_msgs: 2, discard: DiscardPolicy.New, max_msg_size: 64 });
    await js.publish(`lim.${u}.a`, enc("1"));
    await rejectsAPI(
      js.publish(`lim.${u}.a`, enc("x".repeat(65))),
      400,
      10054,
      "message size exceeds maximum allowed",
    );
    await js.publish(`lim.${u}.b`, enc("2"));
    await rejectsAPI(js.publish(`lim.${u}.c`, enc("3")), 503, 10077, "maximum messages exceeded");
    const si = await jsm.streams.info(name);
    assert.deepEqual([si.state.messages, si.state.last_seq], [2, 2]);
  });

  it("gets no responders when no stream captures the subject", async () => {
    const u = uniq();
    await assert.rejects(js.publish(`nostream.${u}`, enc("x")), (err) => {
      assert.equal(err.code, "503", `error ${err.code}: ${err.message}`);
      return true;
    });
  });
});
