// Core NATS tests driven by the unmodified Node.js `nats` client (2.29.3).
//
// They run against whatever server NATS_URL points at: cairn in CI
// (scripts/test.sh starts one), or nats-server v2.15.2 to check that the
// tests themselves encode nats-server's behaviour. Every test asserts
// something that fails if the server misbehaves; the client's own
// bookkeeping (nc.stats()) is used where it shows what came over the wire.

import { describe, it, before, afterEach } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  connect,
  createInbox,
  headers,
  ErrorCode,
  Match,
  StringCodec,
} from "nats";

const NATS_URL = process.env.NATS_URL;
if (!NATS_URL) {
  // Fail loudly instead of silently testing a server on the default port.
  console.error(
    "core.test.mjs: NATS_URL is not set; point it at the server to test, " +
      "e.g. NATS_URL=nats://127.0.0.1:4222 npm test",
  );
  process.exit(2);
}

const sc = StringCodec();
const enc = (s) => sc.encode(s);
const dec = (b) => sc.decode(b);

// ---------------------------------------------------------------------------
// helpers

const open = []; // connections opened by the current test

/** Connects without reconnecting, and records every status event, so that
 * a server that drops or -ERRs the connection fails the test. */
async function conn(opts = {}) {
  const nc = await connect({
    servers: NATS_URL,
    name: "cairn-node-test",
    reconnect: false,
    timeout: 5000,
    ...opts,
  });
  const events = [];
  (async () => {
    for await (const s of nc.status()) events.push(s);
  })().catch(() => {});
  const closed = nc.closed();
  open.push({ nc, events, closed });
  return nc;
}

afterEach(async () => {
  const conns = open.splice(0);
  for (const { nc, events, closed } of conns) {
    if (!nc.isClosed()) await nc.close();
    const err = await closed;
    assert.equal(err, undefined, `connection closed with an error: ${err}`);
    const bad = events.filter((e) => e.type === "disconnect" || e.type === "error");
    assert.deepEqual(bad, [], "unexpected disconnect/error status events");
  }
});

/** A unique subject prefix per test, so tests never see each other's traffic. */
const uniq = (tag = "t") => createInbox(`cairn.${tag}`);

/** A callback-based collector: sub = nc.subscribe(s, { callback: c.cb }). */
function collector() {
  const msgs = [];
  let waiters = [];
  return {
    msgs,
    cb(err, m) {
      if (err) throw err;
      msgs.push(m);
      waiters = waiters.filter((w) => {
        if (msgs.length >= w.n) {
          w.resolve();
          return false;
        }
        return true;
      });
    },
    waitFor(n, ms = 5000, what = "messages") {
      if (msgs.length >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`timed out waiting for ${n} ${what}; got ${msgs.length}`)),
          ms,
        );
        waiters.push({ n, resolve: () => (clearTimeout(t), resolve()) });
      });
    },
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Round-trips every connection and waits a moment, so that anything the
 * server would still (wrongly) deliver has arrived before counts are checked. */
async function settle(...ncs) {
  for (const nc of ncs) await nc.flush();
  await sleep(100);
  for (const nc of ncs) await nc.flush();
}

// ---------------------------------------------------------------------------

describe("INFO", () => {
  it("advertises the fields clients rely on", async () => {
    const nc = await conn();
    const info = nc.info;
    assert.ok(info, "no INFO received");
    assert.equal(typeof info.server_id, "string");
    assert.ok(info.server_id.length > 0, "server_id is empty");
    assert.equal(typeof info.server_name, "string");
    assert.ok(info.server_name.length > 0, "server_name is empty");
    assert.match(info.version, /^\d+\.\d+\.\d+/, "version is not semver");
    const [maj, min] = info.version.split(".").map(Number);
    assert.ok(maj > 2 || (maj === 2 && min >= 2), `version ${info.version} predates headers`);
    assert.equal(info.proto, 1);
    assert.equal(typeof info.go, "string");
    assert.equal(typeof info.host, "string");
    const urlPort = /:(\d+)\/?$/.exec(NATS_URL);
    if (urlPort) assert.equal(info.port, Number(urlPort[1]), "INFO port is not the port we dialled");
    assert.equal(info.headers, true);
    assert.equal(info.max_payload, 1024 * 1024, "default max_payload is 1 MiB");
    assert.ok(Number.isInteger(info.client_id) && info.client_id > 0, "client_id");
    assert.equal(typeof info.client_ip, "string");
    assert.ok(!info.auth_required, "auth_required set on an open server");
    assert.ok(!info.tls_required, "tls_required set on a plain server");
  });

  it("gives each connection its own client_id and one server_id", async () => {
    const a = await conn();
    const b = await conn();
    assert.notEqual(a.info.client_id, b.info.client_id);
    assert.equal(a.info.server_id, b.info.server_id);
  });
});

describe("publish/subscribe", () => {
  it("routes literal subjects and the * and > wildcards", async () => {
    const p = uniq("wild");
    const sub = await conn();
    const pub = await conn();
    const subs = {
      literal: `${p}.a`,
      star: `${p}.*`,
      gt: `${p}.>`,
      mid: `${p}.a.*.c`,
      tail: `${p}.*.b.>`,
      lit3: `${p}.a.b.c`,
    };
    const got = {};
    for (const [k, s] of Object.entries(subs)) {
      got[k] = collector();
      sub.subscribe(s, { callback: got[k].cb });
    }
    await sub.flush();

    const sent = [
      p, // matches nothing: '>' needs at least one more token
      `${p}.a`,
      `${p}.b`,
      `${p}.a.b`,
      `${p}.a.b.c`,
      `${p}.a.x.c`,
      `${p}.z.b.c.d`,
      `${p}.a.b.c.d`,
      `${p}.ab`,
      `${p}.*`, // a published '*' is a literal token: only wildcard subs at that position match
    ];
    for (const s of sent) pub.publish(s, enc(s));
    await pub.flush();

    const want = {
      literal: [`${p}.a`],
      star: [`${p}.a`, `${p}.b`, `${p}.ab`, `${p}.*`],
      gt: sent.slice(1),
      mid: [`${p}.a.b.c`, `${p}.a.x.c`],
      tail: [`${p}.a.b.c`, `${p}.z.b.c.d`, `${p}.a.b.c.d`],
      lit3: [`${p}.a.b.c`],
    };
    for (const [k, w] of Object.entries(want)) await got[k].waitFor(w.length, 5000, `${k} msgs`);
    await settle(pub, sub);
    for (const [k, w] of Object.entries(want)) {
      assert.deepEqual(got[k].msgs.map((m) => m.subject), w, `subscription ${subs[k]}`);
      assert.deepEqual(got[k].msgs.map((m) => dec(m.data)), w, `payloads for ${subs[k]}`);
    }
  });

  it("delivers a burst in order with exact bytes, including CRLF and protocol-looking payloads", async () => {
    const p = uniq("order");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    sub.subscribe(p, { callback: c.cb });
    await sub.flush();

    const N = 20000;
    const payloads = [];
    for (let i = 0; i < N; i++) {
      const tricky = i % 7 === 0 ? `\r\nMSG ${p} 1 5\r\nPING\r\n` : "";
      const body = Buffer.concat([
        Buffer.from(`${i}|${tricky}`),
        randomBytes(i % 1500),
      ]);
      payloads.push(body);
      pub.publish(p, body);
    }
    await pub.flush();
    await c.waitFor(N, 30000);
    await settle(pub, sub);
    assert.equal(c.msgs.length, N);
    for (let i = 0; i < N; i++) {
      assert.ok(
        Buffer.from(c.msgs[i].data).equals(payloads[i]),
        `message ${i} differs (out of order or corrupted)`,
      );
    }
  });

  it("delivers one message to every matching subscription of a connection", async () => {
    const p = uniq("fanout");
    const sub = await conn();
    const pub = await conn();
    const a = collector();
    const b = collector();
    sub.subscribe(`${p}.x`, { callback: a.cb });
    sub.subscribe(`${p}.x`, { callback: b.cb });
    await sub.flush();
    pub.publish(`${p}.x`, enc("one"));
    await pub.flush();
    await a.waitFor(1);
    await b.waitFor(1);
    await settle(pub, sub);
    assert.equal(a.msgs.length, 1);
    assert.equal(b.msgs.length, 1);
    assert.equal(sub.stats().inMsgs, 2, "one MSG per subscription");
  });

  it("stops delivering after unsubscribe", async () => {
    const p = uniq("unsub");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    const s = sub.subscribe(p, { callback: c.cb });
    await sub.flush();
    pub.publish(p, enc("before"));
    await pub.flush();
    await c.waitFor(1);
    s.unsubscribe();
    await sub.flush();
    const before = sub.stats().inMsgs;
    for (let i = 0; i < 10; i++) pub.publish(p, enc("after"));
    await settle(pub, sub);
    assert.equal(sub.stats().inMsgs, before, "server delivered after UNSUB");
    assert.equal(c.msgs.length, 1);
  });
});

describe("queue groups", () => {
  it("gives each message to exactly one member of each group and to every plain subscriber", async () => {
    const p = uniq("queue");
    const c1 = await conn();
    const c2 = await conn();
    const pub = await conn();
    const g1 = [collector(), collector(), collector()];
    const g2 = [collector(), collector()];
    const plain = collector();
    c1.subscribe(p, { queue: "workers", callback: g1[0].cb });
    c1.subscribe(p, { queue: "workers", callback: g1[1].cb });
    c2.subscribe(p, { queue: "workers", callback: g1[2].cb });
    c1.subscribe(p, { queue: "audit", callback: g2[0].cb });
    c2.subscribe(p, { queue: "audit", callback: g2[1].cb });
    c2.subscribe(p, { callback: plain.cb });
    await c1.flush();
    await c2.flush();

    const N = 300;
    for (let i = 0; i < N; i++) pub.publish(p, enc(String(i)));
    await pub.flush();

    const total = (g) => g.reduce((n, c) => n + c.msgs.length, 0);
    const deadline = Date.now() + 10000;
    while ((total(g1) < N || total(g2) < N || plain.msgs.length < N) && Date.now() < deadline) {
      await sleep(20);
    }
    await settle(pub, c1, c2);

    for (const [name, g] of [["workers", g1], ["audit", g2]]) {
      const seen = g.flatMap((c) => c.msgs.map((m) => Number(dec(m.data))));
      assert.equal(seen.length, N, `group ${name}: each message exactly once`);
      assert.equal(new Set(seen).size, N, `group ${name}: a message went to two members`);
      const active = g.filter((c) => c.msgs.length > 0).length;
      assert.ok(active >= 2, `group ${name}: all ${N} messages went to one member`);
    }
    assert.equal(plain.msgs.length, N, "plain subscriber gets every message");
  });

  it("serves requests from a queue of responders, once each", async () => {
    const p = uniq("qsvc");
    const r1 = await conn();
    const r2 = await conn();
    const cl = await conn();
    let handled = 0;
    for (const r of [r1, r2]) {
      r.subscribe(p, {
        queue: "svc",
        callback: (_e, m) => {
          handled++;
          m.respond(m.data);
        },
      });
      await r.flush();
    }
    const N = 50;
    const replies = await Promise.all(
      Array.from({ length: N }, (_, i) => cl.request(p, enc(`r${i}`), { timeout: 5000 })),
    );
    replies.forEach((m, i) => assert.equal(dec(m.data), `r${i}`));
    await settle(r1, r2, cl);
    assert.equal(handled, N, "each request handled by exactly one responder");
  });
});

describe("headers", () => {
  it("round-trips multi-value headers with their case preserved", async () => {
    const p = uniq("hdr");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    sub.subscribe(p, { callback: c.cb });
    await sub.flush();

    const h = headers();
    h.append("X-Mixed-Case", "v1");
    h.append("X-Mixed-Case", "v2");
    h.append("lower-only", "a: b c");
    h.append("UPPER-ONLY", "Y");
    h.append("Nats-Msg-Id", "id-1");
    pub.publish(p, enc("body"), { headers: h });

    const h2 = headers();
    h2.set("Only-Header", "1");
    pub.publish(p, undefined, { headers: h2 }); // headers, empty payload

    pub.publish(p, enc("plain")); // no headers at all
    await pub.flush();
    await c.waitFor(3);
    await settle(pub, sub);
    assert.equal(c.msgs.length, 3);

    const [m1, m2, m3] = c.msgs;
    assert.equal(dec(m1.data), "body");
    assert.ok(m1.headers, "headers lost");
    assert.deepEqual(m1.headers.values("X-Mixed-Case"), ["v1", "v2"]);
    assert.equal(m1.headers.get("lower-only"), "a: b c");
    assert.equal(m1.headers.get("UPPER-ONLY"), "Y");
    assert.equal(m1.headers.get("Nats-Msg-Id"), "id-1");
    assert.deepEqual(
      m1.headers.keys().sort(),
      ["Nats-Msg-Id", "UPPER-ONLY", "X-Mixed-Case", "lower-only"],
      "header names must keep their case",
    );
    assert.equal(m1.headers.has("x-mixed-case", Match.Exact), false, "name was re-cased");
    assert.equal(m1.headers.code, 0, "no status on an ordinary message");
    assert.equal(m1.headers.hasError, false);

    assert.equal(m2.data.length, 0);
    assert.ok(m2.headers, "header-only message lost its headers");
    assert.equal(m2.headers.get("Only-Header"), "1");

    assert.equal(dec(m3.data), "plain");
    assert.equal(m3.headers, undefined, "a PUB must arrive as MSG, not HMSG");
  });

  it("carries headers through request/reply in both directions", async () => {
    const p = uniq("hdrreq");
    const srv = await conn();
    const cl = await conn();
    srv.subscribe(p, {
      callback: (_e, m) => {
        const rh = headers();
        rh.append("Echo-Of", m.headers?.get("Trace-Id") ?? "missing");
        rh.append("Multi", "1");
        rh.append("Multi", "2");
        m.respond(enc(`re:${dec(m.data)}`), { headers: rh });
      },
    });
    await srv.flush();
    const h = headers();
    h.set("Trace-Id", "abc-123");
    const r = await cl.request(p, enc("q"), { headers: h, timeout: 5000 });
    assert.equal(dec(r.data), "re:q");
    assert.equal(r.headers?.get("Echo-Of"), "abc-123");
    assert.deepEqual(r.headers?.values("Multi"), ["1", "2"]);
  });
});

describe("request/reply", () => {
  it("answers concurrent muxed requests with their own replies", async () => {
    const p = uniq("req");
    const srv = await conn();
    const cl = await conn();
    srv.subscribe(p, { callback: (_e, m) => m.respond(enc(`re:${dec(m.data)}`)) });
    await srv.flush();
    const N = 200;
    const replies = await Promise.all(
      Array.from({ length: N }, (_, i) => cl.request(p, enc(String(i)), { timeout: 5000 })),
    );
    replies.forEach((m, i) => assert.equal(dec(m.data), `re:${i}`));
  });

  it("works with per-request inboxes and with arbitrary reply subjects", async () => {
    const p = uniq("req2");
    const srv = await conn();
    const cl = await conn();
    const replyTos = [];
    srv.subscribe(p, {
      callback: (_e, m) => {
        replyTos.push(m.reply);
        m.respond(enc(`re:${dec(m.data)}`));
      },
    });
    await srv.flush();

    const a = await cl.request(p, enc("a"), { timeout: 5000, noMux: true });
    assert.equal(dec(a.data), "re:a");

    const custom = `my.replies.${uniq("x").split(".").pop()}`;
    const b = await cl.request(p, enc("b"), { timeout: 5000, noMux: true, reply: custom });
    assert.equal(dec(b.data), "re:b");
    assert.equal(replyTos[1], custom, "reply subject must reach the responder unchanged");

    const pfx = await conn({ inboxPrefix: "_CAIRN_INBOX" });
    const c = await pfx.request(p, enc("c"), { timeout: 5000 });
    assert.equal(dec(c.data), "re:c");
    assert.ok(replyTos[2].startsWith("_CAIRN_INBOX."), `reply was ${replyTos[2]}`);
  });

  it("fails fast with 503 no responders when nobody listens", async () => {
    const cl = await conn();
    for (const opts of [{}, { noMux: true }, { noMux: true, reply: `custom.${uniq("nr").split(".").pop()}` }]) {
      const subj = uniq("nobody");
      const t0 = Date.now();
      await assert.rejects(
        cl.request(subj, enc("anyone?"), { timeout: 5000, ...opts }),
        (err) => {
          assert.equal(err.code, ErrorCode.NoResponders, `got ${err.code}: ${err.message}`);
          return true;
        },
      );
      const took = Date.now() - t0;
      assert.ok(took < 1000, `no-responders took ${took} ms (${JSON.stringify(opts)}); must not wait for the timeout`);
    }
  });

  it("sends the 503 status message with Nats-Subject to a plain reply subscription", async () => {
    const cl = await conn();
    const inbox = uniq("inbox");
    const target = uniq("nobody");
    const c = collector();
    cl.subscribe(inbox, { callback: c.cb });
    cl.publish(target, enc("x"), { reply: inbox });
    await c.waitFor(1, 2000, "503 status messages");
    const m = c.msgs[0];
    assert.equal(m.data.length, 0);
    assert.equal(m.headers?.code, 503);
    assert.equal(m.headers?.get("Nats-Subject"), target);
    await settle(cl);
    assert.equal(c.msgs.length, 1);
  });

  it("times out (not 503) when a responder exists but does not answer", async () => {
    const p = uniq("silent");
    const srv = await conn();
    const cl = await conn();
    srv.subscribe(p, { callback: () => {} });
    await srv.flush();
    await assert.rejects(cl.request(p, enc("x"), { timeout: 300 }), (err) => {
      assert.equal(err.code, ErrorCode.Timeout, `got ${err.code}`);
      return true;
    });
  });
});

describe("connection options", () => {
  it("noEcho keeps a connection's own messages from itself only", async () => {
    const p = uniq("echo");
    const quiet = await conn({ noEcho: true });
    const loud = await conn();
    const q = collector();
    const l = collector();
    quiet.subscribe(p, { callback: q.cb });
    loud.subscribe(p, { callback: l.cb });
    await quiet.flush();
    await loud.flush();

    for (let i = 0; i < 3; i++) quiet.publish(p, enc(`quiet${i}`));
    await quiet.flush();
    loud.publish(p, enc("loud"));
    await loud.flush();

    await l.waitFor(4);
    await q.waitFor(1);
    await settle(quiet, loud);
    assert.deepEqual(q.msgs.map((m) => dec(m.data)), ["loud"], "noEcho connection got its own messages");
    assert.deepEqual(
      l.msgs.map((m) => dec(m.data)),
      ["quiet0", "quiet1", "quiet2", "loud"],
      "echo (the default) delivers a connection's own messages to it",
    );
    assert.equal(quiet.stats().inMsgs, 1);
  });
});

describe("auto-unsubscribe", () => {
  it("the server stops after max messages (subscribe with max)", async () => {
    const p = uniq("max");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    const s = sub.subscribe(p, { max: 5, callback: c.cb });
    await sub.flush();
    for (let i = 0; i < 50; i++) pub.publish(p, enc(String(i)));
    await pub.flush();
    await c.waitFor(5);
    await settle(pub, sub);
    assert.deepEqual(c.msgs.map((m) => dec(m.data)), ["0", "1", "2", "3", "4"]);
    assert.equal(sub.stats().inMsgs, 5, "server sent MSGs past the UNSUB max");
    assert.ok(s.isClosed());
  });

  it("honours UNSUB <sid> <max> sent after some messages arrived", async () => {
    const p = uniq("max2");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    const s = sub.subscribe(p, { callback: c.cb });
    await sub.flush();
    pub.publish(p, enc("a"));
    pub.publish(p, enc("b"));
    await pub.flush();
    await c.waitFor(2);
    s.unsubscribe(3); // one more message, then the server removes the subscription
    await sub.flush();
    for (let i = 0; i < 20; i++) pub.publish(p, enc(String(i)));
    await pub.flush();
    await c.waitFor(3);
    await settle(pub, sub);
    assert.deepEqual(c.msgs.map((m) => dec(m.data)), ["a", "b", "0"]);
    assert.equal(sub.stats().inMsgs, 3, "server kept delivering past the max");
  });
});

describe("flush and drain", () => {
  it("flush round-trips, also many at once", async () => {
    const nc = await conn();
    await nc.flush();
    await Promise.all(Array.from({ length: 20 }, () => nc.flush()));
    const rtt = await nc.rtt();
    assert.ok(rtt >= 0 && rtt < 2000, `rtt ${rtt}`);
  });

  it("flush means the server has processed everything published before it", async () => {
    const p = uniq("flush");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    sub.subscribe(p, { callback: c.cb });
    await sub.flush();
    for (let i = 0; i < 1000; i++) pub.publish(p, enc(String(i)));
    await pub.flush();
    // The messages are now on their way to sub; a round trip on sub's
    // connection returns only after them.
    await sub.flush();
    assert.equal(c.msgs.length, 1000);
  });

  it("drain delivers what is in flight, then closes cleanly", async () => {
    const p = uniq("drain");
    const sub = await conn();
    const pub = await conn();
    let n = 0;
    sub.subscribe(p, {
      callback: () => {
        n++;
      },
    });
    await sub.flush();
    const N = 5000;
    for (let i = 0; i < N; i++) pub.publish(p, enc(String(i)));
    await pub.flush();
    await sub.drain();
    assert.equal(n, N, "drain lost messages");
    assert.ok(sub.isClosed());
  });

  it("subscription drain stops that subscription only", async () => {
    const p = uniq("sdrain");
    const sub = await conn();
    const pub = await conn();
    const a = collector();
    const b = collector();
    const sa = sub.subscribe(`${p}.a`, { callback: a.cb });
    sub.subscribe(`${p}.b`, { callback: b.cb });
    await sub.flush();
    pub.publish(`${p}.a`, enc("1"));
    await pub.flush();
    await sa.drain();
    assert.ok(sa.isClosed());
    assert.equal(a.msgs.length, 1);
    pub.publish(`${p}.a`, enc("2"));
    pub.publish(`${p}.b`, enc("3"));
    await pub.flush();
    await b.waitFor(1);
    await settle(pub, sub);
    assert.equal(a.msgs.length, 1, "drained subscription still receiving");
    assert.equal(sub.stats().inMsgs, 2, "server still sends to the drained subscription");
  });
});

describe("payload size", () => {
  let max;
  before(async () => {
    const nc = await connect({ servers: NATS_URL, reconnect: false });
    max = nc.info.max_payload;
    await nc.close();
  });

  it("delivers a payload of exactly max_payload bytes intact", async () => {
    const p = uniq("big");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    sub.subscribe(p, { callback: c.cb });
    await sub.flush();
    const sizes = [max, max - 1, 64 * 1024 + 3, 1];
    const bodies = sizes.map((n) => randomBytes(n));
    for (const b of bodies) pub.publish(p, b);
    await pub.flush();
    await c.waitFor(bodies.length, 15000);
    await settle(pub, sub);
    assert.equal(c.msgs.length, bodies.length);
    c.msgs.forEach((m, i) => {
      assert.equal(m.data.length, sizes[i]);
      assert.ok(Buffer.from(m.data).equals(bodies[i]), `payload of ${sizes[i]} bytes corrupted`);
    });
  });

  it("counts headers against max_payload and still delivers at the limit", async () => {
    const p = uniq("bighdr");
    const sub = await conn();
    const pub = await conn();
    const c = collector();
    sub.subscribe(p, { callback: c.cb });
    await sub.flush();
    const h = headers();
    h.set("K", "v");
    const hlen = h.encode().length;
    const body = randomBytes(max - hlen);
    pub.publish(p, body, { headers: h });
    await pub.flush();
    await c.waitFor(1, 15000);
    assert.ok(Buffer.from(c.msgs[0].data).equals(body));
    assert.equal(c.msgs[0].headers?.get("K"), "v");
    assert.throws(
      () => pub.publish(p, randomBytes(max - hlen + 1), { headers: h }),
      (err) => err.code === ErrorCode.MaxPayloadExceeded,
    );
    await pub.flush(); // the connection is still usable
  });

  it("answers a request with a max_payload reply", async () => {
    const p = uniq("bigreq");
    const srv = await conn();
    const cl = await conn();
    const body = randomBytes(max);
    srv.subscribe(p, { callback: (_e, m) => m.respond(body) });
    await srv.flush();
    const r = await cl.request(p, enc("give"), { timeout: 10000 });
    assert.ok(Buffer.from(r.data).equals(body));
  });
});
