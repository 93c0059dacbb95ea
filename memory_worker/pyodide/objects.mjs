// Durable Objects as workerd runs them for one class: ids, the namespace binding, stubs
// (fetch and RPC methods), one instance per id, the input gate (one event at a time per
// object), and alarms persisted under DIR and fired again after a restart.

import { createHash } from "node:crypto";
import { AsyncLocalStorage } from "node:async_hooks";
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { DurableObjectStorage, sqlClock } from "./storage.mjs";

// Which object event a piece of JS runs for: outbound fetches open that object's gate.
export const currentEvent = new AsyncLocalStorage();

// Cloudflare retries a failed alarm handler with exponential backoff starting at 2 s,
// up to 6 times (documented); then the alarm is dropped.
const ALARM_RETRIES = 6;
const ALARM_FIRST_BACKOFF_MS = 2000;
const MAX_TIMER_MS = 2 ** 31 - 1;
// workerd evicts an object that has had no event for a while (assumed: about 70 s, the
// low end of what Cloudflare describes for idle non-hibernating objects); its state is
// in its database file, and the next event builds it again. The host may shorten it.
export const IDLE_EVICT_MS = 70_000;
// The names workerd calls as event handlers, never as RPC methods.
const HANDLERS = new Set(["fetch", "alarm", "webSocketMessage", "webSocketClose", "webSocketError", "constructor"]);

export class DurableObjectId {
  constructor(hex, name) {
    this._hex = hex;
    this.name = name; // defined for ids made by idFromName, as in workerd
  }
  toString() {
    return this._hex;
  }
  equals(other) {
    return other instanceof DurableObjectId && other._hex === this._hex;
  }
}

// The alarms of every object, in one small database beside the objects' files, so a
// pending alarm survives kill -9. A row stays until its handler succeeded.
export class AlarmBook {
  constructor(dir) {
    this._db = new DatabaseSync(join(dir, "_alarms.sqlite3"));
    this._db.exec("PRAGMA journal_mode=WAL");
    this._db.exec(
      "CREATE TABLE IF NOT EXISTS alarms (id TEXT PRIMARY KEY, name TEXT, at INTEGER NOT NULL, retry INTEGER NOT NULL DEFAULT 0)",
    );
    this._set = this._db.prepare(
      "INSERT INTO alarms(id, name, at, retry) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET at = excluded.at, retry = excluded.retry, name = COALESCE(excluded.name, name)",
    );
    this._get = this._db.prepare("SELECT at FROM alarms WHERE id = ?");
    this._del = this._db.prepare("DELETE FROM alarms WHERE id = ?");
    this.onChange = () => {};
  }
  all() {
    return this._db.prepare("SELECT id, name, at, retry FROM alarms").all();
  }
  nameOf(id) {
    return this._db.prepare("SELECT name FROM alarms WHERE id = ?").get(id)?.name ?? null;
  }
  retryOf(id) {
    return this._db.prepare("SELECT retry FROM alarms WHERE id = ?").get(id)?.retry ?? 0;
  }
  get(id) {
    const row = this._get.get(id);
    return row === undefined ? null : row.at;
  }
  set(id, at, name = null, retry = 0) {
    this._set.run(id, name, BigInt(at), BigInt(retry));
    this.onChange(id);
  }
  delete(id) {
    this._del.run(id);
    this.onChange(id);
  }
  clear() {
    this._db.exec("DELETE FROM alarms");
  }
  close() {
    this._db.close();
  }
}

// workerd's input gate, simplified: a new event is delivered only while no event of the
// object is running, except that an event awaiting an outbound fetch (not storage) lets
// the next ones in, as Durable Objects do. Python runs one step at a time, so the
// synchronous parts of two events never interleave.
class Gate {
  constructor() {
    this.blocking = 0;
    this.waiting = [];
  }
  enter() {
    if (this.blocking === 0 && this.waiting.length === 0) {
      this.blocking += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  leave(event) {
    event.active = false;
    if (event.suspended === 0) this.blocking -= 1;
    this._pump();
  }
  suspend(event) {
    if (event.suspended++ === 0 && event.active) {
      this.blocking -= 1;
      this._pump();
    }
  }
  resume(event) {
    if (--event.suspended === 0 && event.active) this.blocking += 1;
  }
  _pump() {
    while (this.blocking === 0 && this.waiting.length) {
      this.blocking += 1;
      this.waiting.shift()();
    }
  }
  get idle() {
    return this.blocking === 0 && this.waiting.length === 0;
  }
}

export class DurableObjectState {
  constructor(id, storage, onAbort) {
    this.id = id;
    this.storage = storage;
    this._onAbort = onAbort;
  }
  waitUntil(promise) {}
  async blockConcurrencyWhile(callback) {
    return await callback();
  }
  abort(reason) {
    this._onAbort(reason);
  }
}

export class DurableObject {
  // A stub (workerd names its class after the objects it reaches). Any other name on it is
  // an RPC method of the object (`stubOf` below).
  constructor(namespace, id) {
    this._ns = namespace;
    this.id = id;
    this.name = id.name;
  }
  fetch(input, init) {
    // The request crosses to the object as a new Request (its body is consumed here).
    return this._ns._host.deliverFetch(this.id, new Request(input, init ?? undefined));
  }
}

// workerd's stubs answer every property name with an RPC method (not `then`: a stub is
// not a promise). The arguments cross as a structured clone, as over workerd's RPC.
const RPC_STUB = {
  get(stub, name, receiver) {
    if (typeof name === "symbol" || name === "then" || name in stub) return Reflect.get(stub, name, receiver);
    return (...args) => stub._ns._host.deliverCall(stub.id, name, structuredClone(args));
  },
};

function stubOf(namespace, id) {
  return new Proxy(new DurableObject(namespace, id), RPC_STUB);
}

export class DurableObjectNamespace {
  constructor(host) {
    this._host = host;
  }
  idFromName(name) {
    name = String(name);
    return new DurableObjectId(createHash("sha256").update(name, "utf8").digest("hex"), name);
  }
  idFromString(hex) {
    if (!/^[0-9a-f]{64}$/.test(String(hex))) throw new TypeError("Invalid Durable Object ID");
    return new DurableObjectId(String(hex), undefined);
  }
  newUniqueId(options) {
    const bytes = new Uint8Array(32);
    crypto.getRandomValues(bytes);
    return new DurableObjectId(Buffer.from(bytes).toString("hex"), undefined);
  }
  get(id, options) {
    return stubOf(this, id);
  }
  getByName(name, options) {
    return this.get(this.idFromName(name));
  }
}

// Every object of the one class: instances, gates, alarms. `python` builds an instance
// (`(state) => PyProxy`) and calls a handler (`(instance, name, args) => result`).
export class ObjectHost {
  constructor(dir, python, onError, idleEvictMs = IDLE_EVICT_MS) {
    this.dir = dir;
    this.python = python;
    this.onError = onError;
    this.alarms = new AlarmBook(dir);
    this.slots = new Map();
    this.timers = new Map();
    this.namespace = new DurableObjectNamespace(this);
    this.alarms.onChange = (key) => this._schedule(key);
    this.closed = false;
    this.idleEvictMs = idleEvictMs;
    this.evictions = 0;
    // The process CPU spent while alarm handlers held their object (for the benchmarks: the
    // local host compacts in a child process, whose CPU its own figure leaves out). An
    // approximation: JS that runs meanwhile outside the object (another request's Worker
    // half) is counted too. Handlers of several objects interleave (each await resumes in a
    // later task): the CPU is read while any runs, so it is counted once.
    this.alarmCpuMs = 0;
    this.alarmSqlMs = 0; // of which in SQLite (storage.mjs `sqlClock`), read the same way
    this.alarmsRun = 0;
    this._alarmsRunning = 0;
    this._alarmCpuFrom = null;
    this._alarmSqlFrom = 0;
    // The sweep never keeps the process alive on its own.
    this._sweeper = setInterval(() => this.sweep(), Math.max(10, Math.min(idleEvictMs, 10_000))).unref();
  }

  // Evict every object idle for idleEvictMs: its Python instance is released and its
  // database closed (all its state is on disk); an alarm still pending keeps its timer.
  sweep(now = Date.now()) {
    for (const slot of [...this.slots.values()]) {
      if (slot.instance === null && slot.storage === null) {
        if (!this.timers.has(slot.key) && slot.gate.idle && !slot.firing) this.slots.delete(slot.key);
        continue;
      }
      if (!slot.gate.idle || slot.firing || now - (slot.lastUsed ?? 0) < this.idleEvictMs) continue;
      this._evict(slot);
      slot.storage?.close();
      slot.storage = null;
      this.evictions += 1;
    }
  }

  // Objects with a live instance (an idle one counts until the sweep evicts it).
  get open() {
    return [...this.slots.values()].filter((s) => s.instance !== null).length;
  }

  _slot(id) {
    const key = id.toString();
    let slot = this.slots.get(key);
    if (slot === undefined) {
      slot = { key, id, gate: new Gate(), instance: null, storage: null };
      this.slots.set(key, slot);
    } else if (slot.id.name === undefined && id.name !== undefined) {
      slot.id = id;
    }
    return slot;
  }

  _instance(slot) {
    if (slot.instance === null) {
      // While its alarm handler runs, an object reads its own alarm from `slot.firing`.
      const alarms = {
        get: (key) => (slot.firing ? slot.firing.at : this.alarms.get(key)),
        set: (key, at) => {
          if (slot.firing) slot.firing.at = at;
          this.alarms.set(key, at, slot.id.name ?? null);
        },
        delete: (key) => {
          if (slot.firing) slot.firing.at = null;
          this.alarms.delete(key);
        },
      };
      slot.storage ??= new DurableObjectStorage(join(this.dir, `${slot.key}.sqlite3`), alarms, slot.key);
      const state = new DurableObjectState(slot.id, slot.storage, () => this._evict(slot));
      slot.instance = this.python.construct(state);
    }
    return slot.instance;
  }

  _evict(slot) {
    if (slot.instance !== null) {
      this.python.release(slot.instance);
      slot.instance = null;
    }
  }

  async _run(id, name, args, rpc = false) {
    const slot = this._slot(id);
    await slot.gate.enter();
    const event = { slot, active: true, suspended: 0 };
    const alarm = name === "alarm";
    if (alarm && this._alarmsRunning++ === 0) {
      this._alarmCpuFrom = process.cpuUsage();
      this._alarmSqlFrom = sqlClock.ms;
    }
    try {
      const instance = this._instance(slot);
      return await currentEvent.run(event, () => this.python.call(instance, name, args, rpc));
    } finally {
      if (alarm) {
        this.alarmsRun += 1;
        if (--this._alarmsRunning === 0) {
          const used = process.cpuUsage(this._alarmCpuFrom);
          this.alarmCpuMs += (used.user + used.system) / 1000;
          this.alarmSqlMs += sqlClock.ms - this._alarmSqlFrom;
        }
      }
      slot.lastUsed = Date.now();
      slot.gate.leave(event);
    }
  }

  async deliverFetch(id, request) {
    const response = await this._run(id, "fetch", [request]);
    if (!(response instanceof Response)) {
      throw new TypeError("The Durable Object's fetch handler did not return a Response");
    }
    return response;
  }

  // An RPC call: the handlers (fetch, alarm, ...) and private names are not RPC methods.
  async deliverCall(id, name, args) {
    if (HANDLERS.has(name) || name.startsWith("_")) {
      throw new TypeError(`The RPC receiver does not implement the method "${name}".`);
    }
    return await this._run(id, name, args, true);
  }

  // Outbound fetch from inside an object: its gate opens while the request is out.
  async outbound(realFetch, input, init) {
    const event = currentEvent.getStore();
    if (event === undefined) return await realFetch(input, init);
    event.slot.gate.suspend(event);
    try {
      return await realFetch(input, init);
    } finally {
      event.slot.gate.resume(event);
    }
  }

  // -- alarms ------------------------------------------------------------------------

  start() {
    for (const row of this.alarms.all()) {
      const id = new DurableObjectId(row.id, row.name ?? undefined);
      this._slot(id);
      this._schedule(row.id);
    }
  }

  _schedule(key) {
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    const at = this.alarms.get(key);
    if (at === null || this.closed) return;
    const slot = this.slots.get(key);
    if (slot?.firing) return; // rescheduled after the running handler returns
    const delay = Math.min(Math.max(0, at - Date.now()), MAX_TIMER_MS);
    // A timer's callback has no one to hand an error to: it is reported, never thrown.
    const fire = () => this._fire(key, at).catch((err) => this.onError(`alarm timer of ${key}: ${err?.stack ?? err}`));
    this.timers.set(key, setTimeout(fire, delay));
  }

  async _fire(key, at) {
    this.timers.delete(key);
    if (this.alarms.get(key) !== at) return this._schedule(key);
    if (at > Date.now()) return this._schedule(key); // a timer capped at 2^31 ms
    // The slot may have gone with its idle object (sweep) or a closeAll: the alarm's row
    // still names the object.
    const slot = this.slots.get(key) ?? this._slot(new DurableObjectId(key, this.alarms.nameOf(key) ?? undefined));
    const retry = this.alarms.retryOf(key);
    // While the handler runs getAlarm() answers null and a setAlarm() inside it wins. The
    // fired alarm stays persisted until the handler returns, so a crash in between runs
    // it again after the restart (at least once, as workerd delivers alarms).
    slot.firing = { at: null };
    let failed = false;
    try {
      await this._run(slot.id, "alarm", [{ retryCount: retry, isRetry: retry > 0 }]);
    } catch (err) {
      failed = true;
      this.onError(`alarm of ${slot.id.name ?? key}: ${err?.stack ?? err}`);
    }
    const rescheduled = slot.firing.at !== null;
    slot.firing = null;
    if (!rescheduled && this.alarms.get(key) === at) {
      if (failed && retry < ALARM_RETRIES) {
        const next = Date.now() + ALARM_FIRST_BACKOFF_MS * 2 ** retry;
        this.alarms.set(key, next, slot.id.name ?? null, retry + 1);
      } else {
        this.alarms.delete(key);
      }
    }
    this._schedule(key);
  }

  // -- life cycle ----------------------------------------------------------------------

  async idle(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    while ([...this.slots.values()].some((s) => !s.gate.idle || s.firing)) {
      if (Date.now() > deadline) throw new Error("objects still busy");
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  closeAll() {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const slot of this.slots.values()) {
      this._evict(slot);
      slot.storage?.close();
      slot.storage = null;
    }
    this.slots.clear();
  }

  close() {
    this.closed = true;
    clearInterval(this._sweeper);
    this.closeAll();
    this.alarms.close();
  }
}
