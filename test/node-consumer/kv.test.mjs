// Key-value and object store, as an application uses them through the
// Node.js `nats` client (2.29.3) views: js.views.kv() (this client version
// has no separate Kvm class; js.views.kv is its KV manager) and js.views.os().
// Both are client conventions on top of streams (KV_<bucket>, OBJ_<bucket>)
// that need direct get, rollups, per-subject limits, expected sequences and
// ordered push consumers with flow control and heartbeats from the server.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { StringCodec } from "nats";
import { LIMIT, collect, setupConnection, uniq } from "./helpers.mjs";

const u = uniq();
const KV_BUCKET = `profiles_${u}`;
const OS_BUCKET = `reports_${u}`;
const ctx = setupConnection("cairn-node-consumer-kv", [`KV_${KV_BUCKET}`, `OBJ_${OS_BUCKET}`]);
const sc = StringCodec();

/** Rejects with a JetStream error whose message matches re. */
async function rejectsWith(p, re) {
  await assert.rejects(p, (err) => {
    assert.match(err.message, re);
    return true;
  });
}

describe("key-value bucket", () => {
  it("creates a bucket; put, get, update, create, delete, purge, history, keys", LIMIT, async () => {
    const kv = await ctx.js.views.kv(KV_BUCKET, { history: 5 });
    let st = await kv.status();
    assert.equal(st.bucket, KV_BUCKET);
    assert.equal(st.history, 5);
    assert.equal(st.values, 0);
    assert.equal(st.streamInfo.config.name, `KV_${KV_BUCKET}`);
    assert.deepEqual(st.streamInfo.config.subjects, [`$KV.${KV_BUCKET}.>`]);

    // put / get
    const r1 = await kv.put("user.ada", sc.encode(JSON.stringify({ name: "Ada", plan: "free" })));
    assert.ok(r1 > 0);
    let e = await kv.get("user.ada");
    assert.equal(e.bucket, KV_BUCKET);
    assert.equal(e.key, "user.ada");
    assert.equal(e.revision, r1);
    assert.equal(e.operation, "PUT");
    assert.deepEqual(e.json(), { name: "Ada", plan: "free" });
    assert.ok(Math.abs(e.created.getTime() - Date.now()) < 60_000, `created ${e.created}`);
    assert.equal(await kv.get("user.nobody"), null);

    // update: compare-and-set on the revision
    const r2 = await kv.update("user.ada", sc.encode(JSON.stringify({ name: "Ada", plan: "pro" })), r1);
    assert.ok(r2 > r1);
    await rejectsWith(kv.update("user.ada", sc.encode("{}"), r1), /wrong last sequence/);
    assert.deepEqual((await kv.get("user.ada")).json(), { name: "Ada", plan: "pro" });
    assert.deepEqual((await kv.get("user.ada", { revision: r1 })).json(), { name: "Ada", plan: "free" });

    // create: only if the key does not exist (or was deleted)
    await rejectsWith(kv.create("user.ada", sc.encode("{}")), /wrong last sequence/);
    const rb = await kv.create("user.bob", sc.encode(JSON.stringify({ name: "Bob" })));
    assert.ok(rb > r2);

    // delete keeps history and leaves a DEL marker; create works again after it
    await kv.delete("user.bob");
    e = await kv.get("user.bob");
    assert.equal(e.operation, "DEL");
    assert.equal(e.length, 0);
    const rb2 = await kv.create("user.bob", sc.encode(JSON.stringify({ name: "Bob", back: true })));
    assert.equal((await kv.get("user.bob")).revision, rb2);

    // purge removes the key's history, leaving one PURGE marker
    await kv.put("user.cy", sc.encode("1"));
    await kv.put("user.cy", sc.encode("2"));
    await kv.purge("user.cy");
    e = await kv.get("user.cy");
    assert.equal(e.operation, "PURGE");
    const cyHistory = await collect(await kv.history({ key: "user.cy" }));
    assert.deepEqual(cyHistory.map((h) => h.operation), ["PURGE"]);

    // history of a key: every revision, oldest first
    const adaHistory = await collect(await kv.history({ key: "user.ada" }));
    assert.deepEqual(adaHistory.map((h) => [h.revision, h.operation, h.json().plan]), [
      [r1, "PUT", "free"],
      [r2, "PUT", "pro"],
    ]);
    const bobHistory = await collect(await kv.history({ key: "user.bob" }));
    assert.deepEqual(bobHistory.map((h) => h.operation), ["PUT", "DEL", "PUT"]);

    // keys: the live keys only
    const keys = await collect(await kv.keys());
    assert.deepEqual(keys.sort(), ["user.ada", "user.bob"]);
    assert.deepEqual((await collect(await kv.keys("user.*"))).sort(), ["user.ada", "user.bob"]);
    assert.deepEqual(await collect(await kv.keys("user.ada")), ["user.ada"]);

    st = await kv.status();
    assert.equal(st.values, 2 + 3 + 1); // ada PUT PUT, bob PUT DEL PUT, cy PURGE
  });

  it("watches: the current values first, then updates", LIMIT, async () => {
    const kv = await ctx.js.views.kv(KV_BUCKET);
    let initialized = false;
    let update = null;
    const w = await kv.watch({
      // Called once the current values have been handed out: change something.
      initializedFn: () => {
        initialized = true;
        update = kv.put("user.ada", sc.encode(JSON.stringify({ name: "Ada", plan: "team" })));
      },
    });
    const seen = [];
    for await (const e of w) {
      seen.push({ key: e.key, op: e.operation, initial: !initialized, rev: e.revision });
      if (update && e.revision === (await update)) break;
    }
    const updateRev = await update;
    // Latest value of each key, deletes and purges included, in revision order; then the update.
    assert.deepEqual(
      seen.filter((s) => s.initial || s.rev !== updateRev).map((s) => [s.key, s.op]),
      [
        ["user.ada", "PUT"],
        ["user.bob", "PUT"],
        ["user.cy", "PURGE"],
      ],
    );
    assert.ok(initialized);
    assert.deepEqual(seen.at(-1), { key: "user.ada", op: "PUT", initial: false, rev: updateRev });
    assert.deepEqual((await kv.get("user.ada")).json(), { name: "Ada", plan: "team" });

    await kv.destroy();
    assert.equal((await collect(ctx.jsm.streams.names())).includes(`KV_${KV_BUCKET}`), false);
  });
});

describe("object store", () => {
  it("puts and gets a 1 MiB blob, lists and deletes objects", LIMIT, async () => {
    const store = await ctx.js.views.os(OS_BUCKET, { description: "monthly reports" });
    const blob = new Uint8Array(crypto.randomBytes(1024 * 1024));
    const digest = `SHA-256=${crypto.createHash("sha256").update(blob).digest("base64url")}=`;

    const info = await store.putBlob({ name: "reports/2024-05.bin", description: "May" }, blob);
    assert.equal(info.name, "reports/2024-05.bin");
    assert.equal(info.bucket, OS_BUCKET);
    assert.equal(info.size, blob.length);
    assert.equal(info.chunks, 8); // 128 KiB chunks
    assert.equal(info.digest.replace(/=+$/, ""), digest.replace(/=+$/, ""));
    assert.equal(info.deleted, false);

    const back = await store.getBlob("reports/2024-05.bin");
    assert.ok(Buffer.from(back).equals(Buffer.from(blob)), "the blob read back differs");
    const r = await store.get("reports/2024-05.bin");
    assert.equal(r.info.size, blob.length);
    let n = 0;
    for await (const chunk of r.data) n += chunk.length;
    assert.equal(n, blob.length);
    assert.ok(!(await r.error), "reading the object failed");

    await store.putBlob({ name: "reports/2024-06.bin" }, sc.encode("short"));
    assert.deepEqual((await store.list()).map((o) => [o.name, o.size]).sort(), [
      ["reports/2024-05.bin", blob.length],
      ["reports/2024-06.bin", 5],
    ]);

    await store.delete("reports/2024-05.bin");
    assert.equal(await store.get("reports/2024-05.bin"), null);
    assert.equal((await store.info("reports/2024-05.bin")).deleted, true);
    assert.deepEqual((await store.list()).map((o) => o.name), ["reports/2024-06.bin"]);
    // The chunks are gone from the stream: two metadata messages and one chunk remain.
    const si = await ctx.jsm.streams.info(`OBJ_${OS_BUCKET}`);
    assert.equal(si.state.messages, 3);

    const st = await store.status();
    assert.equal(st.bucket, OS_BUCKET);
    assert.equal(st.description, "monthly reports");
    await store.destroy();
    assert.equal((await collect(ctx.jsm.streams.names())).includes(`OBJ_${OS_BUCKET}`), false);
  });
});
