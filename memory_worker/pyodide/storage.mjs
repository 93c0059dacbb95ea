// A Durable Object's storage as workerd gives it to a Worker: `ctx.storage.sql.exec`,
// `transactionSync`, `deleteAll` and the one alarm per object, over a `node:sqlite` file.
//
// The class names matter: the workers SDK recognises JS objects by `constructor.name`
// (`DurableObjectStorage` is wrapped in its `_BindingWrapper`). Where workerd's exact
// behaviour is not documented, the comment says what is assumed.

import { DatabaseSync } from "node:sqlite";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";

// Documented Durable Object SQL limits (developers.cloudflare.com/durable-objects/platform/limits).
export const MAX_BOUND_PARAMETERS = 100;
export const MAX_ROW_BYTES = 2_000_000; // "maximum string, BLOB or table row size: 2 MB"
export const MAX_STATEMENT_BYTES = 100_000; // "maximum SQL statement length: 100 KB"

// The PRAGMAs and SQL functions a Durable Object allows (workerd's documented allow-lists);
// every other one is refused. One file, read by the CPython fake (tests/fakes/workers/sql.py) too.
const ALLOWED = JSON.parse(readFileSync(new URL("./durable_object_sql.json", import.meta.url), "utf8"));
const ALLOWED_PRAGMAS = new Set(ALLOWED.pragmas);
const ALLOWED_FUNCTIONS = new Set(ALLOWED.functions);
// The VDBE opcodes that call a function; their p4 reads `name(argc)`.
const CALLS_FUNCTION = /^(Function|PureFunc|AggStep1?|AggFinal|AggValue|AggInverse)$/;

// The functions a statement calls, read from its own program (EXPLAIN): exact, where a
// scan of the SQL text would have to tell a function from a table, a CTE or a keyword.
// node:sqlite (Node 22) has no authorizer, which is what workerd uses.
function refuseFunctions(db, query) {
  for (const op of db.prepare(`EXPLAIN ${query}`).all()) {
    if (!CALLS_FUNCTION.test(op.opcode) || typeof op.p4 !== "string") continue;
    const name = op.p4.replace(/\(.*$/, "").toLowerCase();
    if (!ALLOWED_FUNCTIONS.has(name)) {
      throw refusal(`not authorized to use function: ${name}`, "SQLITE_AUTH");
    }
  }
}

// The wall time spent in SQLite (every exec and the transactions' own statements), summed
// over every database of this process: for the benchmarks, which split a turn's CPU into its
// SQL and the rest (Python in WebAssembly, the JS runtime). A statement runs to its end on
// the host's one thread, so its wall time is its CPU time (unless the machine is busy).
export const sqlClock = { ms: 0 };

const TRANSACTION_STATEMENT = /^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE)\b/i;
const encoder = new TextEncoder();

function sqlError(message, code = "SQLITE_ERROR") {
  return new Error(`${message}: ${code}`);
}

// An error workerd raises before SQLite runs anything: passed on as it is.
function refusal(message, code) {
  return Object.assign(sqlError(message, code), { refused: true });
}

// Refuse what workerd refuses before SQLite sees it. workerd uses an SQLite authorizer;
// node:sqlite (Node 22) has none, so statement kinds are checked by their first words
// and the functions by the statement's program (`refuseFunctions`, when it is prepared).
function refuse(query) {
  if (TRANSACTION_STATEMENT.test(query)) {
    throw refusal(
      "To execute a transaction, please use the state.storage.transaction() or " +
        "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT statements",
      "SQLITE_AUTH",
    );
  }
  if (/^\s*(ATTACH|DETACH)\b/i.test(query)) throw refusal("not authorized", "SQLITE_AUTH");
  const pragma = /^\s*PRAGMA\s+(?:\w+\.)?(\w+)/i.exec(query);
  if (pragma && !ALLOWED_PRAGMAS.has(pragma[1].toLowerCase())) throw refusal("not authorized", "SQLITE_AUTH");
  if (/\b_cf_\w*/i.test(query)) throw refusal("not authorized", "SQLITE_AUTH");
  if (encoder.encode(query).length > MAX_STATEMENT_BYTES) throw refusal("string or blob too big", "SQLITE_TOOBIG");
}

// A binding as workerd accepts it: string, number, null/undefined, ArrayBuffer(View).
// A boolean or a BigInt is a TypeError (assumed from the binding's declared type,
// `string or number or ArrayBuffer or null`). An integral number is bound as an INTEGER
// (node:sqlite would bind every JS number as REAL; SQLite apps see INTEGER there).
function binding(value, index) {
  if (value === null || value === undefined) return { value: null, bytes: 0 };
  // A string's UTF-8 size is at most 3 bytes per UTF-16 unit: counted exactly
  // (utf8Bytes) only when that bound is over the limit.
  if (typeof value === "string") return { value, bytes: value.length * 3 };
  if (typeof value === "number") {
    return { value: Number.isSafeInteger(value) ? BigInt(value) : value, bytes: 8 };
  }
  if (value instanceof ArrayBuffer) return { value: new Uint8Array(value), bytes: value.byteLength };
  if (ArrayBuffer.isView(value)) {
    const view = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    return { value: view, bytes: view.byteLength };
  }
  throw new TypeError(
    `Failed to execute 'exec' on 'SqlStorage': parameter ${index + 2} is not of type ` +
      "'string or number or ArrayBuffer or null'.",
  );
}

// The exact size of the bound values, strings in UTF-8.
function utf8Bytes(bindings) {
  let bytes = 0;
  for (const value of bindings) {
    if (typeof value === "string") bytes += encoder.encode(value).length;
    else if (typeof value === "number") bytes += 8;
    else if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) bytes += value.byteLength;
  }
  return bytes;
}

// node:sqlite (Node 22) reads a TEXT value only up to its first NUL character; workerd
// keeps the whole string (it reads text with its byte length). So a query that returns
// rows also returns, per column, the value as a BLOB when it is a text holding a NUL,
// and that one is decoded instead. Only for SELECT/WITH/VALUES queries with distinct
// column names, run as a subquery (no RETURNING: those keep Node's reading).
// That wrapping costs a third more per SELECT, so a database that cannot hold such a text
// goes without it: one this host created, with `DB.nul-free` beside it, removed (before
// the write) by the first statement that binds a string with a NUL or could make one in
// SQL. A database without the file, however old, is read the safe way.
const READS_ROWS = /^\s*(SELECT|WITH|VALUES)\b/i;
const MAKES_NUL = /\b(char|unhex|printf|format|zeroblob|cast)\s*\(|\bx'/i;
const decoder = new TextDecoder();

function nulSafe(query, columns) {
  if (!READS_ROWS.test(query) || /\bRETURNING\b/i.test(query) || new Set(columns).size !== columns.length) {
    return null;
  }
  const quoted = columns.map((c) => `q."${c.replaceAll('"', '""')}"`);
  const extra = quoted.map(
    (c, i) => `CASE WHEN typeof(${c}) = 'text' AND instr(CAST(${c} AS BLOB), x'00') > 0 THEN CAST(${c} AS BLOB) END AS "_cf_nul_${i}"`,
  );
  return `SELECT q.*, ${extra.join(", ")} FROM (${query}) AS q`;
}

// A column value as workerd returns it: a BLOB is an ArrayBuffer, not a Uint8Array.
function fromSqlite(value) {
  if (value instanceof Uint8Array) return value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength);
  return value;
}

// The cursor `sql.exec` returns. workerd steps it lazily; here the statement runs at once
// (the memory engine always reads every row), so rowsRead is the number of rows returned
// (workerd counts rows scanned: at least that many).
export class SqlStorageCursor {
  constructor(columnNames, rows, rowsWritten) {
    this.columnNames = columnNames;
    this._rows = rows;
    this._pos = 0;
    this.rowsRead = rows.length;
    this.rowsWritten = rowsWritten;
  }

  _object(row) {
    const obj = {}; // a plain object, as workerd's rows are (node:sqlite's have no prototype)
    this.columnNames.forEach((name, i) => {
      obj[name] = row[i];
    });
    return obj;
  }

  _take() {
    const rest = this._rows.slice(this._pos);
    this._pos = this._rows.length;
    return rest;
  }

  next() {
    if (this._pos >= this._rows.length) return { done: true, value: undefined };
    return { done: false, value: this._object(this._rows[this._pos++]) };
  }

  [Symbol.iterator]() {
    return this;
  }

  toArray() {
    return this._take().map((row) => this._object(row));
  }

  one() {
    const rows = this._take();
    if (rows.length !== 1) {
      throw new Error(`Expected exactly one result from SQL query, but got ${rows.length}.`);
    }
    return this._object(rows[0]);
  }

  // A bare iterator of the rows as arrays, as workerd's (it has no toArray).
  raw() {
    const rows = this._take();
    let i = 0;
    return {
      next: () => (i < rows.length ? { done: false, value: rows[i++] } : { done: true, value: undefined }),
      [Symbol.iterator]() {
        return this;
      },
    };
  }
}

// `ctx.storage.sql`: one SQLite database file.
export class SqlStorage {
  constructor(path) {
    this._path = path;
    this._open();
  }

  _open() {
    const created = !existsSync(this._path);
    this._db = new DatabaseSync(this._path);
    this._nulFree = existsSync(this._path + ".nul-free");
    // WAL + synchronous=NORMAL: a commit survives kill -9 of the process (only an OS
    // crash could lose the last ones), which is the durability the tests check.
    this._db.exec("PRAGMA journal_mode=WAL");
    this._db.exec("PRAGMA synchronous=NORMAL");
    this._db.exec("PRAGMA secure_delete=ON"); // forgotten rows are overwritten in the file
    this._plans = new Map();
    this._totalChanges = this._db.prepare("SELECT total_changes() AS n");
    if (created) {
      writeFileSync(this._path + ".nul-free", "");
      this._nulFree = true;
    }
  }

  // From now on this database may hold a text with a NUL: read it the safe way.
  _mayHoldNul() {
    rmSync(this._path + ".nul-free", { force: true });
    this._nulFree = false;
    this._plans.clear();
  }

  // What one SQL text needs on every exec, worked out once per text (as workerd caches
  // its prepared statements by text): the refusals, the prepared statement and its
  // program's functions, the columns, the NUL-safe reader. The oldest of 256 goes first.
  _plan(query) {
    let plan = this._plans.get(query);
    if (plan !== undefined) return plan;
    refuse(query);
    const statement = this._db.prepare(query);
    refuseFunctions(this._db, query);
    const columns = statement.columns().map((c) => c.name);
    const writes = !READS_ROWS.test(query) || /\bRETURNING\b/i.test(query);
    plan = { statement, columns, reader: null, counts: true, makesNul: writes && MAKES_NUL.test(query) };
    if (columns.length > 0) {
      const wrapped = this._nulFree ? null : nulSafe(query, columns);
      plan.reader = wrapped === null ? statement : this._db.prepare(wrapped);
      plan.reader.setReturnArrays(true);
      plan.counts = writes; // a plain SELECT writes nothing: no total_changes() around it
    }
    if (this._plans.size >= 256) this._plans.delete(this._plans.keys().next().value);
    this._plans.set(query, plan);
    return plan;
  }

  exec(query, ...bindings) {
    const started = performance.now();
    try {
      return this._exec(String(query), bindings);
    } finally {
      sqlClock.ms += performance.now() - started;
    }
  }

  _exec(query, bindings) {
    if (bindings.length > MAX_BOUND_PARAMETERS) throw sqlError("too many SQL variables");
    let bytes = 0;
    const values = bindings.map((value, i) => {
      const bound = binding(value, i);
      bytes += bound.bytes;
      return bound.value;
    });
    // Assumed: workerd's 2 MB row limit (SQLITE_LIMIT_LENGTH there) seen through the
    // bound values; node:sqlite in Node 22 cannot set SQLite limits.
    if (bytes > MAX_ROW_BYTES && utf8Bytes(bindings) > MAX_ROW_BYTES) {
      throw sqlError("string or blob too big", "SQLITE_TOOBIG");
    }
    try {
      let plan = this._plan(query);
      if (this._nulFree && (plan.makesNul || bindings.some((v) => typeof v === "string" && v.includes("\0")))) {
        this._mayHoldNul();
        plan = this._plan(query);
      }
      if (plan.reader === null) {
        const info = plan.statement.run(...values);
        return new SqlStorageCursor([], [], Number(info.changes));
      }
      const before = plan.counts ? this._totalChanges.get().n : 0;
      const n = plan.columns.length;
      const raw = plan.reader.all(...values);
      const rows = new Array(raw.length);
      for (let r = 0; r < raw.length; r++) {
        const row = raw[r];
        const out = row.length > n ? row.slice(0, n) : row;
        for (let i = 0; i < n; i++) {
          if (out[i] instanceof Uint8Array) out[i] = fromSqlite(out[i]);
          if (row.length > n && row[n + i] !== null) out[i] = decoder.decode(row[n + i]);
        }
        rows[r] = out;
      }
      const written = plan.counts ? this._totalChanges.get().n - before : 0;
      return new SqlStorageCursor(plan.columns, rows, written);
    } catch (err) {
      if (err instanceof TypeError || err.refused) throw err;
      throw sqlError(String(err.message || err).replace(/: SQLITE_\w+$/, ""));
    }
  }

  get databaseSize() {
    const pages = this._db.prepare("PRAGMA page_count").get().page_count;
    const size = this._db.prepare("PRAGMA page_size").get().page_size;
    return pages * size;
  }

  _internal(statement) {
    const started = performance.now();
    try {
      this._db.exec(statement);
    } finally {
      sqlClock.ms += performance.now() - started;
    }
  }

  _wipe() {
    this.close();
    for (const suffix of ["", "-wal", "-shm", ".nul-free"]) rmSync(this._path + suffix, { force: true });
    this._open();
  }

  close() {
    this._plans.clear();
    this._db.close();
  }
}

// `ctx.storage`: SQL, transactionSync, deleteAll, the alarm (kept by `alarms`, which
// persists it for the host). Alarm and deleteAll calls answer promises, as in workerd.
export class DurableObjectStorage {
  constructor(path, alarms, key) {
    this.sql = new SqlStorage(path);
    this._alarms = alarms;
    this._key = key;
    this._depth = 0;
  }

  transactionSync(fn) {
    const name = `_cf_txn_${this._depth}`;
    this.sql._internal(`SAVEPOINT ${name}`);
    this._depth += 1;
    let result;
    try {
      result = fn();
    } catch (err) {
      this.sql._internal(`ROLLBACK TO ${name}`);
      this.sql._internal(`RELEASE ${name}`);
      throw err;
    } finally {
      this._depth -= 1;
    }
    this.sql._internal(`RELEASE ${name}`);
    return result;
  }

  async getAlarm(options) {
    return this._alarms.get(this._key);
  }

  async setAlarm(scheduledTime, options) {
    const at = scheduledTime instanceof Date ? scheduledTime.getTime() : scheduledTime;
    if (typeof at !== "number" || !Number.isFinite(at)) {
      throw new TypeError("setAlarm() expects a number (ms since the epoch) or a Date");
    }
    this._alarms.set(this._key, Math.trunc(at));
  }

  async deleteAlarm(options) {
    this._alarms.delete(this._key);
  }

  // Deletes every table; the alarm stays (workerd keeps it unless deleteAlarm is called).
  async deleteAll(options) {
    if (this._depth) throw new Error("deleteAll() cannot be called inside a transaction");
    this.sql._wipe();
  }

  close() {
    this.sql.close();
  }
}
