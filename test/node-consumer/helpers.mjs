// Shared helpers of the consumer acceptance tests (not a test file itself).
//
// The tests run against whatever server NATS_URL points at, which must have
// JetStream enabled: cairn -js in CI (scripts/test.sh starts one), or
// nats-server -js v2.15.2 to check that the tests encode nats-server's
// behaviour. They expect a throwaway server: every stream they make is
// deleted again.

import { before, after } from "node:test";
import assert from "node:assert/strict";
import { connect, nuid } from "nats";

export const NATS_URL = process.env.NATS_URL;
if (!NATS_URL) {
  console.error(
    "test/node-consumer: NATS_URL is not set; point it at a server with JetStream, " +
      "e.g. NATS_URL=nats://127.0.0.1:4222 npm test",
  );
  process.exit(2);
}

/**
 * The replicas of the streams the application tests make (NATS_REPLICAS, default 1): 3 when
 * they run against a 3-server cluster (scripts/test.sh, "Node client against a cluster").
 */
export const REPLICAS = Number(process.env.NATS_REPLICAS || "1");
/** Options of every test: a server that never delivers fails the test in 20 s instead of hanging. */
export const LIMIT = { timeout: 20_000 };
/** Milliseconds to the nanoseconds of the JetStream API. */
export const nanos = (ms) => ms * 1_000_000;
export const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** A unique upper-case token for names in this run. */
export const uniq = () => nuid.next().slice(-8).toUpperCase();

/** Polls fn until it returns a truthy value (which is returned), or fails after timeoutMs. */
export async function eventually(what, fn, timeoutMs = 10_000, everyMs = 25) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
    }
    await delay(everyMs);
  }
}

/** Collects an async iterable (a lister, a KV iterator) into an array. */
export async function collect(iterable) {
  const out = [];
  for await (const v of iterable) out.push(v);
  return out;
}

/** The API error code (err_code) of a rejected JetStream call, or undefined. */
export const errCode = (err) => err?.api_error?.err_code;

/**
 * Connects once for the test file and keeps a small sentinel stream for its
 * whole run. (nats-server v2.15.2 removes the account's store directory in a
 * goroutine when its last stream is deleted, and a stream create racing with
 * that removal can fail with "error creating store for stream"; keeping one
 * stream around avoids the race.) The streams named in `streams` are
 * deleted before the file's tests (leftovers of an interrupted run) and
 * after them. Returns an object whose nc, js and jsm fields are set once the
 * file's before() hook has run.
 */
export function setupConnection(name, streams = []) {
  const ctx = { nc: null, js: null, jsm: null, sentinel: `SENTINEL_${uniq()}` };
  before(async () => {
    ctx.nc = await connect({ servers: NATS_URL, name, reconnect: false, timeout: 5000 });
    ctx.jsm = await ctx.nc.jetstreamManager();
    ctx.js = ctx.nc.jetstream();
    await ctx.jsm.streams.add({ name: ctx.sentinel, subjects: [`sentinel.${ctx.sentinel}`] });
    for (const s of streams) await deleteStreamIfExists(ctx.jsm, s);
  });
  after(async () => {
    if (ctx.jsm) {
      for (const s of streams) await deleteStreamIfExists(ctx.jsm, s);
      await ctx.jsm.streams.delete(ctx.sentinel);
    }
    if (ctx.nc && !ctx.nc.isClosed()) await ctx.nc.close();
    // An ordered consumer whose creation the server refuses keeps retrying
    // on a timer even after the connection is closed (nats.js 2.29.3), which
    // would keep this file's process alive until the runner's timeout. Once
    // the tests are done, let it go. (The timer is unref'ed: a clean run
    // exits before it fires.)
    setTimeout(() => process.exit(), 2000).unref();
  });
  return ctx;
}

/** Deletes a stream if it exists (leftovers of an interrupted run). */
export async function deleteStreamIfExists(jsm, name) {
  try {
    await jsm.streams.delete(name);
  } catch (err) {
    if (errCode(err) !== 10059) throw err; // 10059: stream not found
  }
}
