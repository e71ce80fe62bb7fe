// Stream features driven by the unmodified Node.js `nats` client (2.29.3):
// mirrors and sources between streams of one server, the stream's
// subject_transform, republish, per-message TTL (Nats-TTL) and the
// JetStream API's pedantic mode (docs/protocol.md 3.2 and 5.8).
//
// They run against whatever server NATS_URL points at, which must have
// JetStream enabled: cairn -js in CI (scripts/test.sh starts one), or
// nats-server -js v2.15.2 to check that the tests encode nats-server's
// behaviour. The server is shared with the other test files, so every
// stream made here is deleted again. Origins are always created before
// the streams that copy from them: nats-server retries a missing origin
// only every ten seconds or so.

import { describe, it, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import { connect, headers, nuid, StringCodec } from "nats";

const NATS_URL = process.env.NATS_URL;
if (!NATS_URL) {
  console.error(
    "sources.test.mjs: NATS_URL is not set; point it at a server with JetStream, " +
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
const made = []; // streams to delete after each test, copies before origins

// A stream that lives for the whole file (see streams.test.mjs: it keeps
// nats-server v2.15.2 from removing the account's store directory while
// a test creates a stream).
const SENTINEL = `SENTINEL_${nuid.next().slice(-8).toUpperCase()}`;

before(async () => {
  nc = await connect({ servers: NATS_URL, name: "cairn-node-sources", reconnect: false, timeout: 5000 });
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
  for (const name of made.reverse()) {
    try {
      await jsm.streams.delete(name);
    } catch (err) {
      if (err.api_error?.err_code !== 10059) throw err;
    }
  }
  made.length = 0;
});

/** Adds a stream and remembers to delete it. */
async function addStream(cfg) {
  made.push(cfg.name);
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls the stream's info until ok(info) holds; fails after ms. */
async function waitInfo(name, what, ok, ms = 8000) {
  const deadline = Date.now() + ms;
  let si;
  for (;;) {
    si = await jsm.streams.info(name);
    if (ok(si)) return si;
    if (Date.now() > deadline) {
      assert.fail(`${name}: no ${what} within ${ms} ms; state ${JSON.stringify(si.state)}`);
    }
    await sleep(50);
  }
}

/** Waits until the stream holds n messages. */
const waitMsgs = (name, n, ms) => waitInfo(name, `${n} messages`, (si) => si.state.messages === n, ms);

/** The stored message at seq, or null when there is none (10037). */
async function getMsg(name, seq) {
  try {
    return await jsm.streams.getMessage(name, { seq });
  } catch (err) {
    if (err.api_error?.err_code === 10037) return null;
    throw err;
  }
}

/**
 * Subscribes to subject; next(ms) resolves with the next message and
 * fails after ms.
 */
function subscribe(subject) {
  const sub = nc.subscribe(subject);
  const it = sub[Symbol.asyncIterator]();
  const next = async (ms = 5000) => {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no message on ${subject} within ${ms} ms`)), ms);
    });
    try {
      const r = await Promise.race([it.next(), timeout]);
      assert.ok(!r.done, `subscription ${subject} ended`);
      return r.value;
    } finally {
      clearTimeout(timer);
    }
  };
  return { sub, next };
}

// Nats-Stream-Source of a message sourced from another stream of the same
// server: origin name, origin sequence, the source's filter (">" for
// none), its transform destination (">" for none), the original subject
// and the origin's 8-character identity.
const sourceHeader = /^(\S+) (\d+) (\S+) (\S+) (\S+) [0-9A-Za-z]{8}$/;

// ---------------------------------------------------------------------------

describe("sources", () => {
  it("copy from several origins, with a filter, keeping headers", async () => {
    const u = uniq();
    const [o1, o2, agg] = [`SO1_${u}`, `SO2_${u}`, `SAGG_${u}`];
    await addStream({ name: o1, subjects: [`so1.${u}.>`] });
    await addStream({ name: o2, subjects: [`so2.${u}.>`] });
    for (let i = 1; i <= 3; i++) await js.publish(`so1.${u}.${i}`, enc(`one-${i}`));
    await js.publish(`so2.${u}.a`, enc("two-a"));
    await js.publish(`so2.${u}.b`, enc("two-b (filtered out)"));

    const created = await addStream({
      name: agg,
      sources: [{ name: o1 }, { name: o2, filter_subject: `so2.${u}.a` }],
    });
    assert.deepEqual(
      created.config.sources.map((s) => [s.name, s.filter_subject]),
      [
        [o1, undefined],
        [o2, `so2.${u}.a`],
      ],
    );
    assert.equal(created.config.subjects, undefined, "a stream made only of sources gets no subjects");
    await waitMsgs(agg, 4);

    const h = headers();
    h.set("X-Keep", "kept");
    const pa = await js.publish(`so1.${u}.4`, enc("one-4"), { headers: h });
    assert.deepEqual([pa.stream, pa.seq], [o1, 4], "the origin, not the aggregate, acks");
    const si = await waitMsgs(agg, 5);
    assert.equal(si.mirror, undefined);
    // (nats-server lists a stream's sources in no fixed order.)
    assert.deepEqual(si.sources.map((s) => s.name).sort(), [o1, o2].sort());
    for (const s of si.sources) {
      assert.equal(s.lag, 0, `${s.name} lag`);
      assert.equal(s.error, undefined, `${s.name} error`);
      assert.ok(s.active >= 0, `${s.name} active ${s.active}`);
    }
    assert.equal(si.sources.find((s) => s.name === o2).filter_subject, `so2.${u}.a`);
    assert.equal(si.sources.find((s) => s.name === o1).filter_subject, undefined);

    const seen = {};
    for (let seq = 1; seq <= 5; seq++) {
      const sm = await jsm.streams.getMessage(agg, { seq });
      const src = sm.header.get("Nats-Stream-Source");
      const m = sourceHeader.exec(src);
      assert.ok(m, `message ${seq}: Nats-Stream-Source ${JSON.stringify(src)}`);
      const [, origin, oseq, filter, dest, subj] = m;
      assert.equal(subj, sm.subject, `message ${seq}: original subject`);
      assert.equal(dest, ">", `message ${seq}: no transform`);
      if (origin === o1) {
        assert.equal(filter, ">");
        assert.equal(oseq, sm.subject.split(".").pop(), `${sm.subject}: origin sequence`);
      } else {
        assert.deepEqual([origin, filter, oseq], [o2, `so2.${u}.a`, "1"]);
      }
      seen[sm.subject] = sm.string();
      if (sm.subject === `so1.${u}.4`) assert.equal(sm.header.get("X-Keep"), "kept");
    }
    assert.deepEqual(seen, {
      [`so1.${u}.1`]: "one-1",
      [`so1.${u}.2`]: "one-2",
      [`so1.${u}.3`]: "one-3",
      [`so1.${u}.4`]: "one-4",
      [`so2.${u}.a`]: "two-a",
    });
    // Each origin keeps its own messages.
    assert.equal((await jsm.streams.info(o1)).state.messages, 4);
    assert.equal((await jsm.streams.info(o2)).state.messages, 2);
  });

  it("map subjects with subject_transforms, and an update adds a source", async () => {
    const u = uniq();
    const [oa, ob, t] = [`TOA_${u}`, `TOB_${u}`, `TT_${u}`];
    await addStream({ name: oa, subjects: [`toa.${u}.>`] });
    await addStream({ name: ob, subjects: [`tob.${u}.>`] });
    await js.publish(`toa.${u}.x`, enc("a1"));
    await js.publish(`tob.${u}.y`, enc("b1"));

    const created = await addStream({
      name: t,
      subjects: [`tt.${u}.own`],
      sources: [{ name: oa, subject_transforms: [{ src: `toa.${u}.>`, dest: `mapped.${u}.>` }] }],
    });
    assert.deepEqual(created.config.sources[0].subject_transforms, [{ src: `toa.${u}.>`, dest: `mapped.${u}.>` }]);
    let si = await waitMsgs(t, 1);
    assert.deepEqual(si.sources[0].subject_transforms, [{ src: `toa.${u}.>`, dest: `mapped.${u}.>` }]);
    const sm = await jsm.streams.getMessage(t, { last_by_subj: `mapped.${u}.x` });
    assert.equal(sm.string(), "a1");
    const m = sourceHeader.exec(sm.header.get("Nats-Stream-Source"));
    assert.ok(m, `Nats-Stream-Source ${sm.header.get("Nats-Stream-Source")}`);
    assert.deepEqual(m.slice(1, 6), [oa, "1", `toa.${u}.>`, `mapped.${u}.>`, `toa.${u}.x`]);

    // Its own subjects still capture publishes.
    const pa = await js.publish(`tt.${u}.own`, enc("own"));
    assert.deepEqual([pa.stream, pa.seq], [t, 2]);

    si = await jsm.streams.update(t, { sources: [...created.config.sources, { name: ob }] });
    assert.deepEqual(
      si.config.sources.map((s) => s.name),
      [oa, ob],
    );
    si = await waitMsgs(t, 3);
    assert.deepEqual(si.sources.map((s) => s.name).sort(), [oa, ob].sort());
    const fromB = await jsm.streams.getMessage(t, { last_by_subj: `tob.${u}.y` });
    assert.equal(fromB.string(), "b1");
    assert.match(fromB.header.get("Nats-Stream-Source"), new RegExp(`^${ob} 1 > > tob\\.${u}\\.y \\S{8}$`));

    // New messages in either origin keep flowing, mapped or not.
    await js.publish(`toa.${u}.z`, enc("a2"));
    await js.publish(`tob.${u}.w`, enc("b2"));
    si = await waitMsgs(t, 5);
    const subjects = (await jsm.streams.info(t, { subjects_filter: ">" })).state.subjects;
    assert.deepEqual(subjects, {
      [`mapped.${u}.x`]: 1,
      [`mapped.${u}.z`]: 1,
      [`tt.${u}.own`]: 1,
      [`tob.${u}.y`]: 1,
      [`tob.${u}.w`]: 1,
    });
  });
});

describe("mirrors", () => {
  it("keep the origin's sequences, gaps included", async () => {
    const u = uniq();
    const [orig, mir] = [`MO_${u}`, `MM_${u}`];
    await addStream({ name: orig, subjects: [`mo.${u}.>`] });
    for (let i = 1; i <= 6; i++) {
      const h = headers();
      h.set("X-N", `${i}`);
      await js.publish(`mo.${u}.${i % 2}`, enc(`m${i}`), { headers: h, msgID: `id${i}` });
    }
    await jsm.streams.deleteMessage(orig, 3);
    await jsm.streams.deleteMessage(orig, 4);

    const created = await addStream({ name: mir, mirror: { name: orig } });
    assert.equal(created.config.mirror.name, orig);
    assert.equal(created.config.subjects, undefined);
    let si = await waitMsgs(mir, 4);
    assert.equal(si.mirror.name, orig);
    assert.equal(si.mirror.error, undefined);
    assert.equal(si.sources, undefined);

    await js.publish(`mo.${u}.1`, enc("m7"));
    si = await waitMsgs(mir, 5);
    assert.equal(si.mirror.lag, 0);
    assert.deepEqual(
      [si.state.first_seq, si.state.last_seq, si.state.num_deleted],
      [1, 7, 2],
      "the mirror's sequences are the origin's",
    );
    for (let seq = 1; seq <= 7; seq++) {
      const want = await getMsg(orig, seq);
      const got = await getMsg(mir, seq);
      if (want === null) {
        assert.equal(got, null, `seq ${seq} is deleted in the origin`);
        continue;
      }
      assert.ok(got, `mirror seq ${seq}`);
      assert.equal(got.subject, want.subject, `seq ${seq} subject`);
      assert.equal(got.string(), want.string(), `seq ${seq} data`);
      assert.equal(got.timestamp, want.timestamp, `seq ${seq} time`);
      assert.equal(got.header.get("Nats-Msg-Id"), want.header.get("Nats-Msg-Id"), `seq ${seq} Nats-Msg-Id`);
      assert.equal(got.header.get("X-N"), want.header.get("X-N"), `seq ${seq} X-N`);
      assert.equal(got.header.get("Nats-Stream-Source"), "", `seq ${seq}: a mirror adds no source header`);
    }

    // A mirror has no subjects and no sources of its own.
    await rejectsAPI(
      jsm.streams.add({ name: `MX_${u}`, mirror: { name: orig }, subjects: [`mx.${u}`] }),
      400,
      10034,
      "stream mirrors can not contain subjects",
    );
    await rejectsAPI(
      jsm.streams.add({ name: `MX_${u}`, mirror: { name: orig }, sources: [{ name: orig }] }),
      400,
      10031,
      "stream mirrors can not also contain other sources",
    );
    // A mirror's mirror config cannot change.
    await rejectsAPI(
      jsm.streams.update(mir, { mirror: { name: orig, filter_subject: `mo.${u}.1` } }),
      400,
      10055,
      "stream mirror configuration can not be updated",
    );
  });

  it("with a filter, copy only matching messages at their origin sequences", async () => {
    const u = uniq();
    const [orig, mir] = [`FO_${u}`, `FM_${u}`];
    await addStream({ name: orig, subjects: [`fo.${u}.*`] });
    for (const s of ["a", "b", "a", "b", "a"]) await js.publish(`fo.${u}.${s}`, enc(s));
    await addStream({ name: mir, mirror: { name: orig, filter_subject: `fo.${u}.a` } });
    await js.publish(`fo.${u}.b`, enc("b")); // 6
    await js.publish(`fo.${u}.a`, enc("a")); // 7
    const si = await waitMsgs(mir, 4);
    assert.equal(si.mirror.filter_subject, `fo.${u}.a`);
    assert.equal(si.state.last_seq, 7);
    const held = [];
    for (let seq = 1; seq <= 7; seq++) {
      const sm = await getMsg(mir, seq);
      if (sm) {
        assert.equal(sm.subject, `fo.${u}.a`);
        held.push(seq);
      }
    }
    assert.deepEqual(held, [1, 3, 5, 7]);
  });
});

describe("subject_transform", () => {
  it("stores messages under the mapped subject", async () => {
    const u = uniq();
    const name = `ST_${u}`;
    const si = await addStream({
      name,
      subjects: [`st.${u}.in.*`],
      subject_transform: { src: `st.${u}.in.*`, dest: `st.${u}.out.{{wildcard(1)}}` },
    });
    assert.deepEqual(si.config.subject_transform, { src: `st.${u}.in.*`, dest: `st.${u}.out.{{wildcard(1)}}` });
    const pa = await js.publish(`st.${u}.in.a`, enc("x"));
    assert.deepEqual([pa.stream, pa.seq], [name, 1]);
    await js.publish(`st.${u}.in.b`, enc("y"));
    const sm = await jsm.streams.getMessage(name, { seq: 1 });
    assert.equal(sm.subject, `st.${u}.out.a`);
    assert.equal(sm.string(), "x");
    const info = await jsm.streams.info(name, { subjects_filter: ">" });
    assert.deepEqual(info.state.subjects, { [`st.${u}.out.a`]: 1, [`st.${u}.out.b`]: 1 });
    assert.equal((await jsm.streams.getMessage(name, { last_by_subj: `st.${u}.out.b` })).seq, 2);
  });
});

describe("republish", () => {
  const wantHeaders = (m, stream, subj, seq, last) => {
    assert.ok(m.headers, `${m.subject}: no headers`);
    assert.equal(m.headers.get("Nats-Stream"), stream);
    assert.equal(m.headers.get("Nats-Subject"), subj);
    assert.equal(m.headers.get("Nats-Sequence"), `${seq}`);
    assert.equal(m.headers.get("Nats-Last-Sequence"), `${last}`);
    const ts = m.headers.get("Nats-Time-Stamp");
    assert.match(ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/, `Nats-Time-Stamp ${ts}`);
    assert.ok(Math.abs(Date.parse(ts) - Date.now()) < 60_000, `Nats-Time-Stamp ${ts}`);
  };

  it("sends a copy of each stored message to a plain subscription", async () => {
    const u = uniq();
    const name = `RP_${u}`;
    const { sub, next } = subscribe(`rp.${u}.>`);
    await nc.flush();
    const si = await addStream({
      name,
      subjects: [`rps.${u}.>`],
      republish: { src: `rps.${u}.*`, dest: `rp.${u}.{{wildcard(1)}}` },
    });
    assert.deepEqual(si.config.republish, { src: `rps.${u}.*`, dest: `rp.${u}.{{wildcard(1)}}` });

    const h = headers();
    h.set("X-App", "1");
    const a1 = await js.publish(`rps.${u}.a`, enc("first"), { headers: h });
    await js.publish(`rps.${u}.b.deep`, enc("not matched by the source"));
    const a3 = await js.publish(`rps.${u}.a`, enc("second"));
    await js.publish(`rps.${u}.c`, enc("third"));

    let m = await next();
    assert.equal(m.subject, `rp.${u}.a`);
    assert.equal(dec(m.data), "first");
    assert.equal(m.headers.get("X-App"), "1");
    wantHeaders(m, name, `rps.${u}.a`, a1.seq, 0);
    m = await next();
    assert.equal(m.subject, `rp.${u}.a`);
    assert.equal(dec(m.data), "second");
    wantHeaders(m, name, `rps.${u}.a`, a3.seq, a1.seq);
    m = await next();
    assert.equal(m.subject, `rp.${u}.c`, "the unmatched subject is not republished");
    wantHeaders(m, name, `rps.${u}.c`, 4, 0);
    sub.unsubscribe();
  });

  it("headers_only sends Nats-Msg-Size and no payload", async () => {
    const u = uniq();
    const name = `RPH_${u}`;
    const { sub, next } = subscribe(`rph.${u}.>`);
    await nc.flush();
    const si = await addStream({
      name,
      subjects: [`rphi.${u}.*`],
      republish: { src: `rphi.${u}.*`, dest: `rph.${u}.$1`, headers_only: true },
    });
    assert.equal(si.config.republish.headers_only, true);
    await js.publish(`rphi.${u}.x`, enc("12345"));
    await js.publish(`rphi.${u}.x`, enc(""));
    let m = await next();
    assert.equal(m.subject, `rph.${u}.x`);
    assert.equal(m.data.length, 0);
    assert.equal(m.headers.get("Nats-Msg-Size"), "5");
    wantHeaders(m, name, `rphi.${u}.x`, 1, 0);
    m = await next();
    assert.equal(m.data.length, 0);
    assert.equal(m.headers.get("Nats-Msg-Size"), "0");
    wantHeaders(m, name, `rphi.${u}.x`, 2, 1);
    // The stream itself keeps the whole message.
    assert.equal((await jsm.streams.getMessage(name, { seq: 1 })).string(), "12345");
    sub.unsubscribe();
  });
});

describe("per-message TTL", () => {
  // nats 2.29.3 has no TTL publish option (JetStreamPublishOptions has
  // msgID, timeout, headers, expect, retries): the Nats-TTL header is set
  // by hand.
  const ttl = (v) => {
    const h = headers();
    h.set("Nats-TTL", v);
    return { headers: h };
  };

  it("removes a message once its Nats-TTL has passed", async () => {
    const u = uniq();
    const name = `TTL_${u}`;
    const si = await addStream({ name, subjects: [`ttl.${u}.*`], allow_msg_ttl: true });
    assert.equal(si.config.allow_msg_ttl, true);
    const sent = Date.now();
    let pa = await js.publish(`ttl.${u}.a`, enc("short"), ttl("1s"));
    assert.deepEqual([pa.stream, pa.seq], [name, 1]);
    pa = await js.publish(`ttl.${u}.b`, enc("stays"));
    assert.equal(pa.seq, 2);
    const sm = await jsm.streams.getMessage(name, { seq: 1 });
    assert.equal(sm.header.get("Nats-TTL"), "1s", "the header is stored");

    await waitMsgs(name, 1, 8000);
    assert.ok(Date.now() - sent >= 900, `expired after ${Date.now() - sent} ms, before its TTL`);
    assert.equal(await getMsg(name, 1), null, "message 1 after its TTL");
    const info = await jsm.streams.info(name);
    assert.deepEqual([info.state.messages, info.state.first_seq, info.state.last_seq], [1, 2, 2]);
    assert.equal((await jsm.streams.getMessage(name, { seq: 2 })).string(), "stays");
  });

  it("is refused by a stream without allow_msg_ttl (10166)", async () => {
    const u = uniq();
    const name = `NOTTL_${u}`;
    await addStream({ name, subjects: [`nottl.${u}`] });
    await rejectsAPI(js.publish(`nottl.${u}`, enc("x"), ttl("2s")), 400, 10166, "per-message TTL is disabled");
    await rejectsAPI(js.publish(`nottl.${u}`, enc("x"), ttl("never")), 400, 10166, "per-message TTL is disabled");
    const withTTL = `TTLBAD_${u}`;
    await addStream({ name: withTTL, subjects: [`ttlbad.${u}`], allow_msg_ttl: true });
    await rejectsAPI(js.publish(`ttlbad.${u}`, enc("x"), ttl("500ms")), 400, 10165, "invalid per-message TTL");
    assert.equal((await jsm.streams.info(name)).state.messages, 0);
    assert.equal((await jsm.streams.info(withTTL)).state.messages, 0);
  });
});

describe("pedantic mode", () => {
  // nats 2.29.3 sends the stream config object as given, so a `pedantic`
  // field reaches the server as the StreamConfigRequest's flag.
  it("refuses configs the server would otherwise adjust (10157)", async () => {
    const u = uniq();
    const age = 30_000_000_000; // 30 s, shorter than the 2 min default duplicate window
    await rejectsAPI(
      jsm.streams.add({ name: `PED_${u}`, subjects: [`ped.${u}`], max_age: age, pedantic: true }),
      400,
      10157,
      "pedantic mode: duplicate window cannot be bigger than max age",
    );
    await rejectsAPI(
      jsm.streams.add({ name: `PED_${u}`, subjects: [`ped.${u}`], max_msgs: -5, pedantic: true }),
      400,
      10157,
      "pedantic mode: max_msgs must be set to -1",
    );
    await rejectsAPI(
      jsm.streams.add({
        name: `PED_${u}`,
        subjects: [`ped.${u}.>`],
        republish: { dest: `pedrp.${u}.>` },
        pedantic: true,
      }),
      400,
      10157,
      "pedantic mode: republish source can not be empty",
    );
    await rejectsAPI(jsm.streams.info(`PED_${u}`), 404, 10059, "stream not found");

    // Spelled out, the same config is accepted; without the flag the
    // server fills in what it adjusts.
    let si = await addStream({
      name: `PED_${u}`,
      subjects: [`ped.${u}`],
      max_age: age,
      duplicate_window: age,
      pedantic: true,
    });
    assert.equal(si.config.duplicate_window, age);
    assert.equal(si.config.pedantic, undefined, "the flag is not part of the config");
    si = await addStream({ name: `LAX_${u}`, subjects: [`lax.${u}`], max_age: age, max_msgs: -5 });
    assert.deepEqual([si.config.duplicate_window, si.config.max_msgs], [age, -1]);

    // Updates too.
    await rejectsAPI(
      jsm.streams.update(`LAX_${u}`, { max_bytes: -7, pedantic: true }),
      400,
      10157,
      "pedantic mode: max_bytes must be set to -1",
    );
    si = await jsm.streams.update(`LAX_${u}`, { max_bytes: -7 });
    assert.equal(si.config.max_bytes, -1);
  });
});
