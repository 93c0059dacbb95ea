// The Durable Object limits and semantics of storage.mjs / objects.mjs, under Node's own
// test runner (run by tests/hosts/test_pyodide.py): what workerd refuses is refused here.

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DurableObjectStorage, MAX_BOUND_PARAMETERS, MAX_ROW_BYTES, sqlClock } from "./storage.mjs";
import { AlarmBook, ObjectHost } from "./objects.mjs";

function storage() {
  const dir = mkdtempSync(join(tmpdir(), "do-storage-"));
  const alarms = new Map();
  const s = new DurableObjectStorage(join(dir, "obj.sqlite3"), alarms, "obj");
  s.sql.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v)");
  return { s, dir, done: () => (s.close(), rmSync(dir, { recursive: true, force: true })) };
}

test("BEGIN, SAVEPOINT and friends are refused in exec", () => {
  const { s, done } = storage();
  for (const q of ["BEGIN", "begin transaction", " SAVEPOINT a", "COMMIT", "ROLLBACK", "RELEASE a", "END"]) {
    assert.throws(() => s.sql.exec(q), /transactionSync/, q);
  }
  assert.throws(() => s.sql.exec("PRAGMA journal_mode=DELETE"), /SQLITE_AUTH/);
  assert.throws(() => s.sql.exec("ATTACH 'x.db' AS x"), /SQLITE_AUTH/);
  assert.throws(() => s.sql.exec("CREATE TABLE _cf_mine (a)"), /SQLITE_AUTH/);
  for (let i = 0; i < 2; i++) assert.throws(() => s.sql.exec("BEGIN"), /transactionSync.*SQLITE_AUTH/); // never cached
  assert.deepEqual(s.sql.exec("PRAGMA table_info(t)").toArray().map((r) => r.name), ["id", "v"]);
  done();
});

test("SQL functions outside the Durable Object allow-list are refused", () => {
  const { s, done } = storage();
  for (const q of ["SELECT load_extension('x')", "SELECT sqlite_compileoption_used('x')", "SELECT v, fts5_source_id() FROM t"]) {
    assert.throws(() => s.sql.exec(q), /not authorized to use function.*SQLITE_AUTH/, q);
    assert.throws(() => s.sql.exec(q), /not authorized to use function.*SQLITE_AUTH/, q); // never cached
  }
  s.sql.exec("INSERT INTO t(v) VALUES ('Abc')");
  const row = s.sql.exec("SELECT lower(v) AS l, count(*) OVER () AS n, json_extract('{\"a\":1}', '$.a') AS j FROM t").one();
  assert.deepEqual([row.l, row.n, row.j], ["abc", 1, 1]);
  done();
});

test("more than 100 bound parameters and rows over 2 MB are refused", () => {
  const { s, done } = storage();
  const marks = (n) => Array(n).fill("?").join(",");
  const ok = s.sql.exec(`SELECT ${marks(MAX_BOUND_PARAMETERS)}`, ...Array(MAX_BOUND_PARAMETERS).fill(1));
  assert.equal(Array.from(ok.raw())[0].length, MAX_BOUND_PARAMETERS);
  assert.throws(() => s.sql.exec(`SELECT ${marks(101)}`, ...Array(101).fill(1)), /too many SQL variables/);
  assert.throws(() => s.sql.exec("INSERT INTO t(v) VALUES (?)", "x".repeat(MAX_ROW_BYTES + 1)), /SQLITE_TOOBIG/);
  assert.throws(() => s.sql.exec("INSERT INTO t(v) VALUES (?)", new ArrayBuffer(MAX_ROW_BYTES + 1)), /SQLITE_TOOBIG/);
  s.sql.exec("INSERT INTO t(v) VALUES (?)", "é".repeat(MAX_ROW_BYTES / 2)); // exactly 2 MB of UTF-8
  done();
});

test("bindings: string, number, null, undefined, ArrayBuffer; booleans and BigInts are a TypeError", () => {
  const { s, done } = storage();
  const row = s.sql.exec("SELECT ? AS a, ? AS b, ? AS c, ? AS d, ? AS e, typeof(?) AS f", "x", 2.5, null, undefined, new Uint8Array([1, 2]).buffer, 7).one();
  assert.deepEqual([row.a, row.b, row.c, row.d, row.f], ["x", 2.5, null, null, "integer"]);
  assert.ok(row.e instanceof ArrayBuffer && row.e.byteLength === 2);
  assert.throws(() => s.sql.exec("SELECT ?", true), TypeError);
  assert.throws(() => s.sql.exec("SELECT ?", 1n), TypeError);
  done();
});

test("cursor: toArray, one, raw, iteration, rowsWritten; plain-object rows", () => {
  const { s, done } = storage();
  const ins = s.sql.exec("INSERT INTO t(v) VALUES (?), (?)", "a", "b");
  assert.equal(ins.rowsWritten, 2);
  const rows = s.sql.exec("SELECT id, v FROM t ORDER BY id").toArray();
  assert.deepEqual(rows, [{ id: 1, v: "a" }, { id: 2, v: "b" }]);
  assert.equal(Object.getPrototypeOf(rows[0]), Object.prototype);
  assert.throws(() => s.sql.exec("SELECT * FROM t").one(), /Expected exactly one result/);
  assert.deepEqual([...s.sql.exec("SELECT v FROM t ORDER BY id")].map((r) => r.v), ["a", "b"]);
  const raw = s.sql.exec("SELECT id, v FROM t ORDER BY id").raw();
  assert.equal(raw.toArray, undefined); // workerd's raw() is a bare iterator
  assert.deepEqual(Array.from(raw), [[1, "a"], [2, "b"]]);
  assert.equal(s.sql.exec("SELECT id FROM t").rowsWritten, 0);
  const del = s.sql.exec("DELETE FROM t WHERE id = 2 RETURNING v");
  assert.deepEqual([del.toArray(), del.rowsWritten], [[{ v: "b" }], 1]);
  done();
});

test("text with a NUL character comes back whole", () => {
  const { s, done } = storage();
  s.sql.exec("INSERT INTO t(v) VALUES (?)", "NUL in \0 the middle");
  assert.equal(s.sql.exec("SELECT v FROM t").one().v, "NUL in \0 the middle");
  assert.equal(s.sql.exec("WITH x AS (SELECT v FROM t) SELECT v AS w FROM x").one().w, "NUL in \0 the middle");
  done();
});

test("a NUL is read whole however it got in: bound, made in SQL, in an older file; deleteAll starts afresh", () => {
  const dir = mkdtempSync(join(tmpdir(), "do-nul-"));
  const path = join(dir, "obj.sqlite3");
  const open = () => new DurableObjectStorage(path, new Map(), "obj");
  let s = open();
  assert.ok(existsSync(path + ".nul-free")); // a new file holds no NUL: plain reads
  s.sql.exec("CREATE TABLE t (v)");
  s.sql.exec("INSERT INTO t VALUES ('a' || char(0) || 'b')"); // made in SQL
  assert.ok(!existsSync(path + ".nul-free"));
  assert.equal(s.sql.exec("SELECT v FROM t").one().v, "a\0b");
  s.close();
  s = open(); // reopened: still read the safe way
  assert.equal(s.sql.exec("SELECT v FROM t").one().v, "a\0b");
  {
    s.sql._wipe(); // deleteAll
    assert.ok(existsSync(path + ".nul-free"));
    s.sql.exec("CREATE TABLE t (v)");
    s.sql.exec("INSERT INTO t VALUES (?)", "c\0d"); // bound
    assert.equal(s.sql.exec("SELECT v FROM t").one().v, "c\0d");
  }
  s.close();
  const old = join(dir, "old.sqlite3"); // written before the marker existed
  const db = new DatabaseSync(old);
  db.exec("CREATE TABLE t (v)");
  db.prepare("INSERT INTO t VALUES (?)").run("e\0f");
  db.close();
  const o = new DurableObjectStorage(old, new Map(), "old");
  assert.equal(o.sql.exec("SELECT v FROM t").one().v, "e\0f");
  o.close();
  rmSync(dir, { recursive: true, force: true });
});

test("transactionSync: all or nothing, nested, result returned", () => {
  const { s, done } = storage();
  assert.equal(s.transactionSync(() => (s.sql.exec("INSERT INTO t(v) VALUES ('kept')"), 42)), 42);
  assert.throws(() =>
    s.transactionSync(() => {
      s.sql.exec("INSERT INTO t(v) VALUES ('gone')");
      s.transactionSync(() => s.sql.exec("INSERT INTO t(v) VALUES ('gone too')"));
      throw new Error("boom");
    }),
  /boom/);
  assert.deepEqual(s.sql.exec("SELECT v FROM t").toArray(), [{ v: "kept" }]);
  done();
});

test("alarms persist in the alarm book; deleteAll keeps the alarm and empties the tables", async () => {
  const dir = mkdtempSync(join(tmpdir(), "do-alarms-"));
  const book = new AlarmBook(dir);
  const alarms = { get: (k) => book.get(k), set: (k, at) => book.set(k, at, "chat"), delete: (k) => book.delete(k) };
  const s = new DurableObjectStorage(join(dir, "obj.sqlite3"), alarms, "obj");
  s.sql.exec("CREATE TABLE t (a)");
  assert.equal(await s.getAlarm(), null);
  await s.setAlarm(new Date(1_000));
  await s.deleteAll();
  assert.equal(s.sql.exec("SELECT COUNT(*) AS n FROM sqlite_master").one().n, 0);
  book.close();
  const again = new AlarmBook(dir); // a restart
  assert.deepEqual(again.all().map((r) => ({ ...r })), [{ id: "obj", name: "chat", at: 1000, retry: 0 }]);
  await assert.rejects(s.setAlarm("soon"), TypeError);
  again.close();
  s.close();
  rmSync(dir, { recursive: true, force: true });
});

test("alarms of several objects that run at once count the process's CPU once", async () => {
  const dir = mkdtempSync(join(tmpdir(), "do-alarm-cpu-"));
  const burn = (ms) => {
    const until = process.cpuUsage().user + ms * 1000;
    while (process.cpuUsage().user < until);
  };
  // Like a Python handler on Pyodide: each await resumes in a later task, so handlers interleave.
  const python = {
    construct: () => ({}),
    release: () => {},
    call: async () => {
      for (let i = 0; i < 5; i++) {
        burn(5);
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
  const host = new ObjectHost(dir, python, (text) => assert.fail(text));
  const before = process.cpuUsage();
  for (const name of ["a", "b"]) host.alarms.set(host.namespace.idFromName(name).toString(), Date.now(), name);
  const deadline = Date.now() + 10_000;
  while (host.alarmsRun < 2) {
    assert.ok(Date.now() < deadline, "the alarms did not run");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const used = process.cpuUsage(before);
  assert.ok(host.alarmCpuMs >= 45, `the handlers' 50 ms are counted: ${host.alarmCpuMs}`);
  assert.ok(host.alarmCpuMs <= (used.user + used.system) / 1000, `${host.alarmCpuMs} ms, more than the process used`);
  host.close();
  rmSync(dir, { recursive: true, force: true });
});

test("a stub's RPC methods reach the object's method through its gate, with copies of the arguments", async () => {
  const dir = mkdtempSync(join(tmpdir(), "do-rpc-"));
  const calls = [];
  let running = 0;
  const python = {
    construct: () => ({}),
    release: () => {},
    call: async (instance, name, args, rpc) => {
      running += 1;
      assert.equal(running, 1, "two events of one object ran at once");
      calls.push({ name, args, rpc });
      await new Promise((resolve) => setImmediate(resolve));
      running -= 1;
      return `${name}:${args[0]}`;
    },
  };
  const host = new ObjectHost(dir, python, (text) => assert.fail(text));
  const stub = host.namespace.get(host.namespace.idFromName("chat"));
  assert.equal(stub.then, undefined); // a stub is not a promise: awaiting it gives the stub
  assert.equal(await stub, stub);
  assert.equal(stub.name, "chat");
  const body = new Uint8Array([104, 0, 255]);
  const answers = await Promise.all([stub.serve("POST", body), stub.serve("GET", null)]);
  body[0] = 0; // after the call: the object holds its own copy
  assert.deepEqual(answers, ["serve:POST", "serve:GET"]);
  assert.deepEqual(calls.map((c) => [c.name, c.rpc]), [["serve", true], ["serve", true]]);
  assert.deepEqual([...calls[0].args[1]], [104, 0, 255]);
  for (const name of ["fetch", "alarm", "_private"]) {
    await assert.rejects(host.deliverCall(stub.id, name, []), /does not implement the method/, name);
  }
  host.close();
  rmSync(dir, { recursive: true, force: true });
});

test("sqlClock counts the time of every statement, refused ones and transactions' own included", () => {
  const { s, done } = storage();
  const slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300000) SELECT COUNT(*) AS c FROM n";
  let before = sqlClock.ms;
  const started = performance.now();
  assert.equal(s.sql.exec(slow).one().c, 300000);
  const took = performance.now() - started;
  assert.ok(sqlClock.ms - before > 0.5 * took, `${sqlClock.ms - before} of ${took} ms counted`);
  assert.ok(sqlClock.ms - before <= took, `${sqlClock.ms - before} ms, more than the call took`);
  before = sqlClock.ms;
  assert.throws(() => s.sql.exec("BEGIN"), /SQLITE_AUTH/);
  s.transactionSync(() => s.sql.exec("INSERT INTO t(v) VALUES (1)"));
  assert.ok(sqlClock.ms > before, "the refusal, the insert and SAVEPOINT/RELEASE are counted");
  done();
});
