// The store port over the conformance wire (version 1), served by one SQLite-backed Durable Object
// per scope, as the platform the reference simulates hosts it.
//
// Theory of operation. The worker's fetch handler reads one wire request (a JSON object POSTed to
// any path), answers `hello` itself, and hands every other request to the Durable Object named by
// the request's `scope`. The object runs the operation as ONE `transactionSync` over the spec's SQL
// (spec-sql.js, copied character for character), so a refused or failed operation leaves nothing
// behind, exactly as the reference's BEGIN IMMEDIATE ... ROLLBACK does. The store's time is the
// request's `now`: the object never reads a clock of its own, which is what lets a caller drive this
// store and the reference in lockstep. docs/conformance.md describes the wire.

import { DurableObject } from "cloudflare:workers";
import {
  JOB_RUN_BEGIN_SQL,
  JOB_RUN_CLAIM_SQL,
  JOB_RUN_DDL,
  JOB_RUN_DUE_SQL,
  JOB_RUN_LIVE_SQL,
  JOB_RUN_MISS_SETTLE_SQL,
  JOB_RUN_MISS_SQL,
  JOB_RUN_PATCH_SQL,
  JOB_RUN_RENEW_SQL,
  JOB_STEP_RECORD_SQL,
} from "./spec-sql.js";

const WIRE = 1;
const STORE = "workerd-durable-object";

const RUN_COLUMNS = [
  "id", "module_id", "job", "instance", "payload", "subject_id", "status", "cursor", "counters",
  "attempts", "last_error", "started_at", "updated_at", "next_attempt_at", "ended_at",
  "lease_owner", "lease_began_at", "admission_misses",
];
const STEP_COLUMNS = ["run_id", "step", "result", "attempts", "last_error", "recorded_at"];
const STATUSES = ["running", "done", "failed"];

const JOB_LEASE_EXPIRED_NOTE =
  "interrupted: the pass holding this run stopped reporting, and its lease expired";
const JOB_LEASE_TOO_SHORT_NOTE = "lease too short for this environment";
const JOB_ADMISSION_MISS_MAX = 10;
const JOB_RUN_LIST_LIMIT = 50;
const JOB_RUN_LIST_MAX = 500;
const JOB_ERASED_RUNNING_NOTE =
  "stopped by subject erasure (#37) — this run held an erased subject's data, " +
  "so it cannot resume from it";
const JOB_ERASED_FINISHED_NOTE =
  "redacted by subject erasure (#37) — what this job run held about the subject is gone; " +
  "that it ran, and when, is not";
const REDACTED_KEY = "_substratRedacted";
const ERASURE_REASON = "subject-erasure";

// A refusal of bad input: the wire's `validation_failed`, naming the dotted path it refused.
class Refusal extends Error {
  constructor(path, message) {
    super(`${path} ${message}`);
    this.path = path;
  }
}

// A copy that would replace a run the scope holds: the wire's `conflict` (no paths).
class Clash extends Error {}

// -- time: ISO-8601 UTC with milliseconds and Z, the one spelling whose string order is time order --

const ISO = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$/;

function parseIso(text) {
  const match = typeof text === "string" ? ISO.exec(text) : null;
  if (match === null) return null;
  const [year, month, day, hour, minute, second, millis] = match.slice(1).map(Number);
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, millis);
  const real =
    date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day && hour <= 23 && minute <= 59 && second <= 59;
  return real ? date.getTime() : null;
}

function isoFromMs(ms) {
  const date = new Date(Math.floor(ms));
  const year = date.getUTCFullYear();
  if (!(year >= 0 && year <= 9999)) {
    throw new Error(`time ${ms} ms falls outside the years 0000 to 9999`);
  }
  const pad = (value, width) => String(value).padStart(width, "0");
  return (
    `${pad(year, 4)}-${pad(date.getUTCMonth() + 1, 2)}-${pad(date.getUTCDate(), 2)}` +
    `T${pad(date.getUTCHours(), 2)}:${pad(date.getUTCMinutes(), 2)}:` +
    `${pad(date.getUTCSeconds(), 2)}.${pad(date.getUTCMilliseconds(), 3)}Z`
  );
}

// -- input checks, in the reference's order so the first refusal names the same path --------------

function timeMs(value, path) {
  const ms = parseIso(value);
  if (ms === null) {
    throw new Refusal(path, "is not ISO-8601 UTC with milliseconds and Z");
  }
  return ms;
}

function checkOwner(owner) {
  if (typeof owner !== "string" || owner === "") {
    throw new Refusal("owner", "must be the non-empty lease owner its claim was made with");
  }
  checkSize(owner, JOB_ID_MAX_BYTES, "owner");
}

// -- the row limit: mirrors driver/_limits.py (caps in UTF-8 bytes under the platform's 2 MB row) --

const JOB_PAYLOAD_MAX_BYTES = 1_000_000;
const JOB_CURSOR_MAX_BYTES = 500_000;
const JOB_COUNTERS_MAX_BYTES = 100_000;
const JOB_STEP_RESULT_MAX_BYTES = 1_000_000;
const JOB_ERROR_MAX_BYTES = 100_000;
const JOB_ID_MAX_BYTES = 1_024;
const JOB_TIME_AHEAD_MAX_MS = 2 * 31_536_000_000;

const ENCODER = new TextEncoder();

function sizeProblem(value, cap) {
  if (typeof value !== "string" || value.length <= Math.floor(cap / 4)) return null;
  return ENCODER.encode(value).length > cap ? `is more than the ${cap} bytes it may take` : null;
}

function checkSize(value, cap, path) {
  const problem = sizeProblem(value, cap);
  if (problem !== null) throw new Refusal(path, problem);
}

function aheadProblem(value, nowMs) {
  return parseIso(value) - nowMs > JOB_TIME_AHEAD_MAX_MS
    ? "is more than two years past the store's now"
    : null;
}

// A time a write stores: the one ISO spelling, and not so far ahead that a run would wait for ages.
function checkWrittenTime(value, path, nowMs, nullable) {
  if (value === null && nullable) return;
  timeMs(value, path);
  const problem = aheadProblem(value, nowMs);
  if (problem !== null) throw new Refusal(path, problem);
}

const RUN_CAPS = [
  ["id", JOB_ID_MAX_BYTES], ["module_id", JOB_ID_MAX_BYTES], ["job", JOB_ID_MAX_BYTES],
  ["instance", JOB_ID_MAX_BYTES], ["payload", JOB_PAYLOAD_MAX_BYTES],
  ["subject_id", JOB_ID_MAX_BYTES], ["cursor", JOB_CURSOR_MAX_BYTES],
  ["counters", JOB_COUNTERS_MAX_BYTES], ["last_error", JOB_ERROR_MAX_BYTES],
  ["lease_owner", JOB_ID_MAX_BYTES],
];
const STEP_CAPS = [
  ["run_id", JOB_ID_MAX_BYTES], ["step", JOB_ID_MAX_BYTES],
  ["result", JOB_STEP_RESULT_MAX_BYTES], ["last_error", JOB_ERROR_MAX_BYTES],
];
const RUN_TIMES = ["started_at", "updated_at", "next_attempt_at", "ended_at", "lease_began_at"];

function sizeProblems(row, caps) {
  return caps
    .map(([column, cap]) => [column, sizeProblem(row[column], cap)])
    .filter(([, problem]) => problem !== null);
}

// 2^63, the first integer past the largest SQLite holds (2^63 - 1), as a double holds it: a
// count at or past it would not bind, and is refused (a double rounds 2^63 - 1 up to it).
const SQLITE_INT_PAST = 2 ** 63;

function checkWhole(value, path, minimum) {
  if (!Number.isInteger(value) || value < minimum) {
    throw new Refusal(path, `must be a whole number of at least ${minimum}`);
  }
  if (value >= SQLITE_INT_PAST) {
    throw new Refusal(path, "is more than 9223372036854775807, the largest integer SQLite holds");
  }
}

// A lease of at most a year keeps its expiry a time the store can write (JOB_LEASE_MAX_MS).
const JOB_LEASE_MAX_MS = 31_536_000_000;

function checkLease(value) {
  checkWhole(value, "lease_ms", 1);
  if (value > JOB_LEASE_MAX_MS) {
    throw new Refusal("lease_ms", `must be at most ${JOB_LEASE_MAX_MS} (a year)`);
  }
}

function checkText(value, path, nullable) {
  if (!(typeof value === "string" || (nullable && value === null))) {
    throw new Refusal(path, nullable ? "must be text or null" : "must be text");
  }
}

function checkStatus(status, path) {
  if (!STATUSES.includes(status)) {
    throw new Refusal(path, "must be one of 'running', 'done', 'failed'");
  }
}

// -- JSON text at the doors: mirrors json_text_problem in driver/_json.py ------------------------

const JOB_JSON_MAX_DEPTH = 128;
const JOB_JSON_MAX_INT_DIGITS = 4300;

// How deep text nests [ and { outside its strings, measured on any text, JSON or not.
function nestingDepth(text) {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  let escaped = false;
  for (const char of text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (char === "\\") escaped = true;
      else if (char === '"') inString = false;
    } else if (char === '"') {
      inString = true;
    } else if (char === "[" || char === "{") {
      depth += 1;
      if (depth > deepest) deepest = depth;
    } else if ((char === "]" || char === "}") && depth > 0) {
      depth -= 1;
    }
  }
  return deepest;
}

const STRINGS = /"(?:[^"\\]|\\.)*"/g;

// NaN, Infinity and -Infinity outside strings spelled null: what Python's lenient parser would
// read. Text JSON only with them is text the two readers disagree on.
function constantsAsNull(text) {
  let out = "";
  let last = 0;
  for (const match of text.matchAll(STRINGS)) {
    out += text.slice(last, match.index).replace(/-Infinity|Infinity|NaN/g, "null") + match[0];
    last = match.index + match[0].length;
  }
  return out + text.slice(last).replace(/-Infinity|Infinity|NaN/g, "null");
}

function hasLongInt(text) {
  const bare = text.replace(STRINGS, '""');
  for (const [token, fraction, exponent] of bare.matchAll(/-?\d+(\.\d+)?([eE][+-]?\d+)?/g)) {
    if (fraction === undefined && exponent === undefined &&
        token.replace("-", "").length > JOB_JSON_MAX_INT_DIGITS) {
      return true;
    }
  }
  return false;
}

// Why JSON text may not enter the store, or null: text that is not JSON at all travels verbatim.
function jsonTextProblem(text) {
  if (nestingDepth(text) > JOB_JSON_MAX_DEPTH) {
    return `nests lists and objects more than ${JOB_JSON_MAX_DEPTH} levels deep`;
  }
  let overflows = false;
  try {
    // A number whose text overflows (1e309) parses as Infinity, which JSON does not have.
    JSON.parse(text, (key, value) => {
      if (typeof value === "number" && !Number.isFinite(value)) overflows = true;
      return value;
    });
  } catch {
    try {
      JSON.parse(constantsAsNull(text));
    } catch {
      return null;
    }
    return "holds NaN, Infinity or -Infinity, which JSON does not have";
  }
  if (hasLongInt(text)) return `holds an int of more than ${JOB_JSON_MAX_INT_DIGITS} digits`;
  return overflows ? "holds a number that overflows to Infinity" : null;
}

function checkJson(value, path) {
  if (typeof value !== "string") return;
  const problem = jsonTextProblem(value);
  if (problem !== null) throw new Refusal(path, problem);
}

function checkPatch(patch, nowMs) {
  checkStatus(patch.status, "patch.status");
  checkWhole(patch.attempts, "patch.attempts", 0);
  checkJson(patch.cursor, "patch.cursor");
  checkJson(patch.counters, "patch.counters");
  checkSize(patch.cursor, JOB_CURSOR_MAX_BYTES, "patch.cursor");
  checkSize(patch.counters, JOB_COUNTERS_MAX_BYTES, "patch.counters");
  checkSize(patch.last_error, JOB_ERROR_MAX_BYTES, "patch.last_error");
  checkWrittenTime(patch.updated_at, "patch.updated_at", nowMs, false);
  checkWrittenTime(patch.next_attempt_at, "patch.next_attempt_at", nowMs, true);
  checkWrittenTime(patch.ended_at, "patch.ended_at", nowMs, true);
}

function checkPatchOwner(owner) {
  // IS ?, not = ?: null is a legitimate owner for a coordinator from before leases.
  if (owner !== null) checkOwner(owner);
}

// -- pure rules the spec shares between adapters --------------------------------------------------

function admissionBackoffMs(misses) {
  return Math.min(300_000, 1_000 * 2 ** Math.max(0, misses - 1));
}

function admissionMissOutcome(misses, now, note) {
  if (misses >= JOB_ADMISSION_MISS_MAX) {
    // The whole failure text, written here so no adapter can spell it differently.
    return {
      status: "failed", nextAttemptAt: null, endedAt: now,
      lastError: `${JOB_LEASE_TOO_SHORT_NOTE}: ${note}`,
    };
  }
  return {
    status: "running",
    nextAttemptAt: isoFromMs(parseIso(now) + admissionBackoffMs(misses)),
    endedAt: null,
    lastError: null,
  };
}

function jobRunListLimit(limit) {
  if (limit === null || limit === undefined || typeof limit === "boolean" || !Number.isFinite(limit)) {
    return JOB_RUN_LIST_LIMIT;
  }
  return Math.min(JOB_RUN_LIST_MAX, Math.max(1, Math.floor(limit)));
}

// -- erasure: what the scope's runs held about one subject, replaced by a tombstone --------------

function tombstone(subjectId, at) {
  return JSON.stringify({ [REDACTED_KEY]: { reason: ERASURE_REASON, subjectId, at } });
}

function parsed(text) {
  if (text === null) return { ok: false };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

// An erasure tombstone, of `subjectId` when one is given (another subject's is not this one's).
function isTombstone(text, subjectId) {
  const read = parsed(text);
  if (!read.ok || !isObject(read.value)) return false;
  const keys = Object.keys(read.value);
  if (keys.length !== 1 || keys[0] !== REDACTED_KEY) return false;
  const inner = read.value[REDACTED_KEY];
  if (!isObject(inner) || inner.reason !== ERASURE_REASON) return false;
  return subjectId === undefined || inner.subjectId === subjectId;
}

function carriesEnvelope(value, subjectId) {
  const pending = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (Array.isArray(item)) {
      pending.push(...item);
    } else if (isObject(item)) {
      if (item.subjectId === subjectId && "piiClass" in item && item.piiClass !== "none") {
        return true;
      }
      pending.push(...Object.values(item));
    }
  }
  return false;
}

// Text too deep to read cannot enter; a database from before that rule may hold some, which is
// treated as carrying every subject (a precaution: erasure never under-reports).
function textCarries(text, subjectId) {
  if (text !== null && nestingDepth(text) > JOB_JSON_MAX_DEPTH) return true;
  const read = parsed(text);
  return read.ok && carriesEnvelope(read.value, subjectId);
}

function notCarriedNote(sourceScopeId) {
  return (
    `not carried: copied from scope ${sourceScopeId} before it ran; ` +
    "it runs in the scope that asked for it, never in a copy"
  );
}

// -- dumps: validated row by row before anything is written (mirrors validate_dump) --------------

// A lone surrogate: text UTF-8, and so SQLite, cannot hold.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function jsonProblem(value, nullable) {
  return textProblem(value, nullable, true) ?? (typeof value === "string" ? jsonTextProblem(value) : null);
}

function textProblem(value, nullable, empty) {
  if (value === null && nullable) return null;
  if (typeof value !== "string") return "is not text";
  if (value === "" && !empty) return "is empty";
  return LONE_SURROGATE.test(value) ? "holds a lone surrogate" : null;
}

function countProblem(value, nullable) {
  if (value === null && nullable) return null;
  return Number.isInteger(value) && value >= 0 ? null : "is not a whole number of 0 or more";
}

function timeProblem(value, nullable) {
  if (value === null && nullable) return null;
  return parseIso(value) === null ? "is not a time in the one ISO spelling" : null;
}

function runProblems(run) {
  const checks = [
    ["id", textProblem(run.id, false, false)],
    ["module_id", textProblem(run.module_id, false, false)],
    ["job", textProblem(run.job, false, false)],
    ["instance", textProblem(run.instance, false, false)],
    ["payload", jsonProblem(run.payload, false)],
    ["subject_id", textProblem(run.subject_id, true, false)],
    ["status", STATUSES.includes(run.status) ? null : "is not a status"],
    ["cursor", jsonProblem(run.cursor, true)],
    ["counters", jsonProblem(run.counters, false)],
    ["attempts", countProblem(run.attempts, false)],
    ["last_error", textProblem(run.last_error, true, true)],
    ["started_at", timeProblem(run.started_at, false)],
    ["updated_at", timeProblem(run.updated_at, false)],
    ["next_attempt_at", timeProblem(run.next_attempt_at, true)],
    ["ended_at", timeProblem(run.ended_at, true)],
    ["lease_owner", textProblem(run.lease_owner, true, false)],
    ["lease_began_at", timeProblem(run.lease_began_at, true)],
    ["admission_misses", countProblem(run.admission_misses, true)],
  ].filter(([, problem]) => problem !== null);
  if (checks.length > 0) return checks;
  const tooBig = sizeProblems(run, RUN_CAPS);
  if (tooBig.length > 0) return tooBig;
  const problems = [];
  if (run.status === "running") {
    if (run.ended_at !== null) problems.push(["ended_at", "is set on a running run"]);
    if (run.lease_owner !== null && run.next_attempt_at === null) {
      problems.push(["next_attempt_at", "is null on a leased run"]);
    }
  } else {
    if (run.ended_at === null) problems.push(["ended_at", "is null on a finished run"]);
    if (run.lease_owner !== null) problems.push(["lease_owner", "is set on a finished run"]);
  }
  if (run.lease_began_at !== null && run.lease_owner === null) {
    problems.push(["lease_began_at", "is set with no lease_owner"]);
  }
  return problems;
}

function stepProblems(step) {
  const checks = [
    ["run_id", textProblem(step.run_id, false, false)],
    ["step", textProblem(step.step, false, false)],
    ["result", jsonProblem(step.result, true)],
    ["attempts", countProblem(step.attempts, false)],
    ["last_error", textProblem(step.last_error, true, true)],
    ["recorded_at", timeProblem(step.recorded_at, false)],
  ].filter(([, problem]) => problem !== null);
  return checks.length > 0 ? checks : sizeProblems(step, STEP_CAPS);
}

// A restored run must be runnable: no time far ahead of the import's now, and no lease ending
// more than a year (the longest lease) past it.
function timeBoundProblems(run, nowMs) {
  for (const column of RUN_TIMES) {
    if (run[column] !== null && aheadProblem(run[column], nowMs) !== null) {
      return [[column, "is more than two years past the import's now"]];
    }
  }
  if (run.status === "running" && run.lease_owner !== null &&
      parseIso(run.next_attempt_at) - nowMs > JOB_LEASE_MAX_MS) {
    return [["next_attempt_at", "is a lease ending more than a year past the import's now"]];
  }
  return [];
}

function validateDump(dump, nowMs) {
  const ids = new Set();
  const live = new Map();
  dump.runs.forEach((run, index) => {
    let problems = isObject(run) ? runProblems(run) : [["", "is not a run row"]];
    if (problems.length === 0) problems = timeBoundProblems(run, nowMs);
    if (problems.length === 0 && ids.has(run.id)) problems = [["id", "appears twice"]];
    if (problems.length === 0 && run.status === "running") {
      const key = JSON.stringify([run.module_id, run.job, run.instance]);
      if (live.has(key)) problems = [["status", "is a second live run for its key"]];
      live.set(key, run.id);
    }
    if (problems.length > 0) {
      const [column, problem] = problems[0];
      throw new Refusal(`dump.runs.${index}${column ? `.${column}` : ""}`, problem);
    }
    ids.add(run.id);
  });
  const seen = new Set();
  dump.steps.forEach((step, index) => {
    let problems = isObject(step) ? stepProblems(step) : [["", "is not a step row"]];
    if (problems.length === 0 && aheadProblem(step.recorded_at, nowMs) !== null) {
      problems = [["recorded_at", "is more than two years past the import's now"]];
    }
    const key = JSON.stringify([step?.run_id, step?.step]);
    if (problems.length === 0 && !ids.has(step.run_id)) problems = [["run_id", "names no run"]];
    if (problems.length === 0 && seen.has(key)) problems = [["step", "appears twice"]];
    if (problems.length > 0) {
      const [column, problem] = problems[0];
      throw new Refusal(`dump.steps.${index}${column ? `.${column}` : ""}`, problem);
    }
    seen.add(key);
  });
}

// -- the store ------------------------------------------------------------------------------------

const rowOf = (record) => Object.fromEntries(RUN_COLUMNS.map((name) => [name, record[name] ?? null]));
const stepOf = (record) => Object.fromEntries(STEP_COLUMNS.map((name) => [name, record[name] ?? null]));

export class Scope extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(JOB_RUN_DDL);
  }

  // One wire request; the reply object. Never throws: a failure is a reply.
  handle(request) {
    const operation = OPERATIONS[request.op];
    if (operation === undefined) {
      return badRequest(`op ${JSON.stringify(request.op)} is not an operation of wire ${WIRE}`);
    }
    const args = request.args ?? {};
    if (!isObject(args)) return badRequest("args must be an object");
    try {
      const result = operation.call(this, args, request.now, request.scope);
      return { ok: true, result: result === undefined ? null : result };
    } catch (error) {
      if (error instanceof Clash) {
        return { ok: false, error: { code: "conflict", message: error.message } };
      }
      if (error instanceof Refusal) {
        return {
          ok: false,
          error: { code: "validation_failed", message: error.message, paths: [error.path] },
        };
      }
      return { ok: false, error: { code: "store_error", message: String(error) } };
    }
  }

  tx(body) {
    return this.ctx.storage.transactionSync(body);
  }

  changes() {
    return this.sql.exec("SELECT changes() AS n").one().n;
  }

  applyPatch(id, patch, owner) {
    this.sql.exec(
      JOB_RUN_PATCH_SQL, patch.status, patch.cursor, patch.counters, patch.attempts,
      patch.last_error, patch.updated_at, patch.next_attempt_at, patch.ended_at, id, owner,
    );
    return this.changes() === 1;
  }

  renew(runId, owner, expiry) {
    this.sql.exec(JOB_RUN_RENEW_SQL, expiry, runId, owner);
    return this.changes() === 1;
  }

  tables() {
    return {
      runs: this.sql.exec("SELECT * FROM _substrat_job_runs ORDER BY id").toArray().map(rowOf),
      steps: this.sql
        .exec(`SELECT ${STEP_COLUMNS.join(", ")} FROM _substrat_job_steps ORDER BY run_id, step`)
        .toArray()
        .map(stepOf),
    };
  }

  // With "tables": true the reply also carries both tables as the operation left them, which
  // saves the kit a round trip per operation.
  async call(request) {
    const reply = this.handle(request);
    if (request.tables === true) reply.tables = this.tables();
    return reply;
  }
}

function badRequest(message) {
  return { ok: false, error: { code: "bad_request", message } };
}

const OPERATIONS = {
  start_or_join({ key, row }, now) {
    const nowMs = timeMs(now, "now");
    if (row.module_id !== key.module_id || row.job !== key.job || row.instance !== key.instance) {
      throw new Refusal("row", "has another key than the join asked for");
    }
    if (row.status !== "running") {
      throw new Refusal("row.status", "must be 'running': start_or_join inserts a live run");
    }
    for (const column of ["payload", "cursor", "counters"]) checkJson(row[column], `row.${column}`);
    for (const [column, cap] of RUN_CAPS) checkSize(row[column], cap, `row.${column}`);
    // What a live run may hold besides its text, in the reference's order (_check_start_row).
    checkWhole(row.attempts, "row.attempts", 0);
    if (row.admission_misses !== null) checkWhole(row.admission_misses, "row.admission_misses", 0);
    if (row.ended_at !== null) {
      throw new Refusal("row.ended_at", "must be null: start_or_join inserts a live run, which has not ended");
    }
    checkWrittenTime(row.started_at, "row.started_at", nowMs, false);
    checkWrittenTime(row.updated_at, "row.updated_at", nowMs, false);
    checkWrittenTime(row.next_attempt_at, "row.next_attempt_at", nowMs, true);
    checkWrittenTime(row.lease_began_at, "row.lease_began_at", nowMs, true);
    // A leased row's next_attempt_at is its lease's expiry: no claim writes one past a year.
    if (row.lease_owner !== null && row.next_attempt_at !== null &&
        parseIso(row.next_attempt_at) - nowMs > JOB_LEASE_MAX_MS) {
      throw new Refusal("row.next_attempt_at", `is a lease ending more than ${JOB_LEASE_MAX_MS} ms past now`);
    }
    return this.tx(() => {
      const live = this.sql.exec(JOB_RUN_LIVE_SQL, key.module_id, key.job, key.instance).toArray();
      if (live.length > 0) return rowOf(live[0]);
      this.sql.exec(
        `INSERT INTO _substrat_job_runs (${RUN_COLUMNS.join(", ")}) ` +
          `VALUES (${RUN_COLUMNS.map(() => "?").join(", ")})`,
        ...RUN_COLUMNS.map((name) => row[name]),
      );
      return rowOf(row);
    });
  },

  due_keys({ now_param, max }, now) {
    timeMs(now, "now");
    timeMs(now_param, "now_param");
    checkWhole(max, "max", 0);
    return this.tx(() =>
      this.sql.exec(JOB_RUN_DUE_SQL, now_param, max).toArray()
        .map(({ id, module_id, job }) => ({ id, module_id, job })),
    );
  },

  claim({ id, owner, lease_ms }, now) {
    const nowMs = timeMs(now, "now");
    checkOwner(owner);
    checkLease(lease_ms);
    const expiry = isoFromMs(nowMs + lease_ms);
    return this.tx(() => {
      // takeover is what the row carried BEFORE the claim: read in the same transaction.
      const before = this.sql.exec("SELECT lease_began_at FROM _substrat_job_runs WHERE id = ?", id).toArray();
      const claimed = this.sql
        .exec(JOB_RUN_CLAIM_SQL, owner, expiry, now, JOB_LEASE_EXPIRED_NOTE, id, now)
        .toArray();
      if (claimed.length === 0) return null;
      return { run: rowOf(claimed[0]), takeover: before[0].lease_began_at !== null };
    });
  },

  begin({ id, owner, margin_ms }, now) {
    const nowMs = timeMs(now, "now");
    checkOwner(owner);
    if (typeof margin_ms !== "number" || !Number.isFinite(margin_ms) || margin_ms < 0) {
      throw new Refusal("margin_ms", "must be a finite number of milliseconds, 0 or more");
    }
    if (margin_ms > JOB_LEASE_MAX_MS) {
      throw new Refusal("margin_ms", `must be at most ${JOB_LEASE_MAX_MS} (a year): no lease outlasts it`);
    }
    const threshold = isoFromMs(nowMs + Math.floor(margin_ms));
    return this.tx(() => {
      this.sql.exec(JOB_RUN_BEGIN_SQL, now, id, owner, threshold);
      return this.changes() === 1;
    });
  },

  miss({ id, owner, note }, now) {
    timeMs(now, "now");
    checkOwner(owner);
    checkText(note, "note", false);
    return this.tx(() => {
      const counted = this.sql.exec(JOB_RUN_MISS_SQL, now, id, owner).toArray();
      if (counted.length === 0) return null;
      const misses = counted[0].admission_misses;
      const outcome = admissionMissOutcome(misses, now, note);
      this.sql.exec(
        JOB_RUN_MISS_SETTLE_SQL, outcome.status, outcome.nextAttemptAt, outcome.endedAt,
        outcome.lastError, id, misses,
      );
      if (this.changes() !== 1) throw new Error(`admission miss ${misses} of run ${id} did not settle`);
      return { misses, failed: outcome.status === "failed" };
    });
  },

  list({ filter }, now) {
    timeMs(now, "now");
    filter = filter ?? {};
    if (filter.status !== undefined && filter.status !== null) checkStatus(filter.status, "filter.status");
    for (const column of ["module_id", "job", "instance"]) {
      if (filter[column] !== undefined) checkText(filter[column], `filter.${column}`, true);
    }
    const limit = filter.limit ?? null;
    if (limit !== null && typeof limit !== "number" && typeof limit !== "boolean") {
      throw new Refusal("filter.limit", "must be a number, or null for the default");
    }
    // JSON has no Infinity: a limit that parses as one was an integer past every double.
    if (limit === Infinity || limit === -Infinity) {
      throw new Refusal("filter.limit", "is past any number JSON carries");
    }
    const clauses = [];
    const params = [];
    for (const column of ["module_id", "job", "instance", "status"]) {
      const value = filter[column];
      if (value !== undefined && value !== null) {
        clauses.push(`${column} = ?`);
        params.push(value);
      }
    }
    const where = clauses.length > 0 ? ` WHERE ${clauses.join(" AND ")}` : "";
    params.push(jobRunListLimit(limit));
    return this.tx(() =>
      this.sql.exec(`SELECT * FROM _substrat_job_runs${where} ORDER BY id DESC LIMIT ?`, ...params)
        .toArray().map(rowOf),
    );
  },

  patch({ id, patch, owner }, now) {
    const nowMs = timeMs(now, "now");
    checkPatchOwner(owner);
    checkPatch(patch, nowMs);
    return this.tx(() => this.applyPatch(id, patch, owner));
  },

  commit_pass({ id, patch, owner }, now) {
    const nowMs = timeMs(now, "now");
    checkPatchOwner(owner);
    checkPatch(patch, nowMs);
    return this.tx(() => {
      const applied = this.applyPatch(id, patch, owner);
      // Only when the patch applied: a stale holder's commit must not empty the new holder's ledger.
      if (applied) this.sql.exec("DELETE FROM _substrat_job_steps WHERE run_id = ?", id);
      return applied;
    });
  },

  begin_step({ run_id, name, owner, lease_ms }, now) {
    const nowMs = timeMs(now, "now");
    checkOwner(owner);
    checkLease(lease_ms);
    const expiry = isoFromMs(nowMs + lease_ms);
    return this.tx(() => {
      if (!this.renew(run_id, owner, expiry)) return { held: false, row: null };
      const found = this.sql
        .exec(
          "SELECT step, result, attempts, last_error FROM _substrat_job_steps WHERE run_id = ? AND step = ?",
          run_id, name,
        )
        .toArray();
      return { held: true, row: found.length === 0 ? null : { ...found[0] } };
    });
  },

  record_step({ run_id, name, result, attempts, last_error, at, owner, lease_ms }, now) {
    const nowMs = timeMs(now, "now");
    timeMs(at, "at");
    checkOwner(owner);
    checkLease(lease_ms);
    checkText(result, "result", true);
    checkText(last_error, "last_error", true);
    checkWhole(attempts, "attempts", 0);
    checkJson(result, "result");
    checkSize(name, JOB_ID_MAX_BYTES, "name");
    checkSize(result, JOB_STEP_RESULT_MAX_BYTES, "result");
    checkSize(last_error, JOB_ERROR_MAX_BYTES, "last_error");
    const expiry = isoFromMs(nowMs + lease_ms);
    return this.tx(() => {
      if (!this.renew(run_id, owner, expiry)) return false;
      this.sql.exec(JOB_STEP_RECORD_SQL, run_id, name, result, attempts, last_error, at, run_id, owner);
      return true;
    });
  },

  // Mirrors scopehost/_erasure.py: a run that holds the subject (declares it, or its payload or
  // cursor carries an envelope) is redacted whole, error text included; a run reached only through
  // step results has those step rows shredded and is settled, its payload and cursor kept.
  shred_subject({ subject_id }, now) {
    timeMs(now, "now");
    if (typeof subject_id !== "string" || subject_id === "") {
      throw new Refusal("subject_id", "must name the data subject to erase");
    }
    return this.tx(() => {
      const stepsByRun = new Map();
      for (const { run_id, step, result, last_error } of this.sql.exec(
        "SELECT run_id, step, result, last_error FROM _substrat_job_steps ORDER BY run_id, step",
      )) {
        if (!stepsByRun.has(run_id)) stepsByRun.set(run_id, []);
        stepsByRun.get(run_id).push({ step, result, last_error });
      }
      const stone = tombstone(subject_id, now);
      const unredactedValue = (text) => text !== null && !isTombstone(text, subject_id);
      const unredactedError = (text) =>
        text !== null && text !== JOB_ERASED_RUNNING_NOTE && text !== JOB_ERASED_FINISHED_NOTE;
      let touched = 0;
      const runs = this.sql
        .exec(
          "SELECT id, subject_id, status, payload, cursor, last_error FROM _substrat_job_runs " +
            "ORDER BY id",
        )
        .toArray();
      for (const run of runs) {
        const steps = stepsByRun.get(run.id) ?? [];
        const note = run.status === "running" ? JOB_ERASED_RUNNING_NOTE : JOB_ERASED_FINISHED_NOTE;
        const holds =
          run.subject_id === subject_id ||
          textCarries(run.payload, subject_id) ||
          textCarries(run.cursor, subject_id);
        if (holds) {
          const unredacted =
            unredactedValue(run.payload) ||
            unredactedValue(run.cursor) ||
            unredactedError(run.last_error) ||
            steps.some((s) => unredactedValue(s.result) || unredactedError(s.last_error));
          if (!unredacted) continue;
          this.sql.exec(
            "UPDATE _substrat_job_steps SET " +
              "result = CASE WHEN result IS NULL THEN NULL ELSE ? END, " +
              "last_error = CASE WHEN last_error IS NULL THEN NULL ELSE ? END WHERE run_id = ?",
            stone, note, run.id,
          );
          this.sql.exec(
            "UPDATE _substrat_job_runs SET payload = ?, " +
              "cursor = CASE WHEN cursor IS NULL THEN NULL ELSE ? END WHERE id = ?",
            stone, stone, run.id,
          );
        } else {
          const carrying = steps.filter((s) => textCarries(s.result, subject_id));
          if (carrying.length === 0) continue;
          for (const s of carrying) {
            this.sql.exec(
              "UPDATE _substrat_job_steps SET result = ?, " +
                "last_error = CASE WHEN last_error IS NULL THEN NULL ELSE ? END " +
                "WHERE run_id = ? AND step = ?",
              stone, note, run.id, s.step,
            );
          }
        }
        if (run.status === "running") {
          this.sql.exec(
            "UPDATE _substrat_job_runs SET status = 'failed', last_error = ?, updated_at = ?, " +
              "next_attempt_at = NULL, ended_at = ?, lease_owner = NULL, lease_began_at = NULL " +
              "WHERE id = ?",
            note, now, now, run.id,
          );
        } else {
          this.sql.exec(
            "UPDATE _substrat_job_runs SET last_error = ?, updated_at = ? WHERE id = ?",
            note, now, run.id,
          );
        }
        touched += 1;
      }
      return touched;
    });
  },

  export_dump(args, now, scope) {
    timeMs(now, "now");
    return this.tx(() => ({ scope_id: scope, ...this.tables() }));
  },

  // Mirrors scopehost/_dump.py: every row validated first (the first problem of the first bad row
  // is the one refusal); into the dump's own scope a RESTORE replaces both tables; into another a
  // COPY adds the rows, settling running ones as not carried, and a run id the scope holds is a
  // conflict with nothing written.
  import_dump({ dump, source_scope_id }, now, scope) {
    timeMs(now, "now");
    if (!isObject(dump) || !Array.isArray(dump.runs) || !Array.isArray(dump.steps)) {
      throw new Refusal("dump", "must be the dump export_dump returned");
    }
    if (source_scope_id !== dump.scope_id) {
      throw new Refusal("source_scope_id", "must be the scope the dump was exported from");
    }
    validateDump(dump, parseIso(now));
    const insertRun =
      `INSERT INTO _substrat_job_runs (${RUN_COLUMNS.join(", ")}) ` +
      `VALUES (${RUN_COLUMNS.map(() => "?").join(", ")})`;
    const insertStep =
      `INSERT INTO _substrat_job_steps (${STEP_COLUMNS.join(", ")}) ` +
      `VALUES (${STEP_COLUMNS.map(() => "?").join(", ")})`;
    return this.tx(() => {
      let runs = dump.runs;
      if (dump.scope_id === scope) {
        this.sql.exec("DELETE FROM _substrat_job_steps");
        this.sql.exec("DELETE FROM _substrat_job_runs");
      } else {
        const held = new Set();
        for (const { id } of this.sql.exec("SELECT id FROM _substrat_job_runs")) held.add(id);
        for (const { run_id } of this.sql.exec("SELECT DISTINCT run_id FROM _substrat_job_steps")) {
          held.add(run_id);
        }
        for (const run of dump.runs) {
          if (held.has(run.id)) {
            throw new Clash(`run ${run.id} is already held by scope ${scope}`);
          }
        }
        runs = dump.runs.map((run) =>
          run.status === "running"
            ? {
                ...run, status: "failed", last_error: notCarriedNote(dump.scope_id),
                updated_at: now, next_attempt_at: null, ended_at: now, lease_owner: null,
                lease_began_at: null,
              }
            : run,
        );
      }
      for (const run of runs) this.sql.exec(insertRun, ...RUN_COLUMNS.map((name) => run[name]));
      for (const step of dump.steps) {
        this.sql.exec(insertStep, ...STEP_COLUMNS.map((name) => step[name]));
      }
      return dump.runs.length;
    });
  },

  tables(args, now) {
    return this.tx(() => this.tables());
  },
};

export default {
  async fetch(request, env) {
    if (request.method !== "POST") {
      return reply(badRequest("POST one wire request, a JSON object, to any path"), 405);
    }
    let body;
    try {
      body = await request.json();
    } catch {
      return reply(badRequest("the body is not JSON"), 400);
    }
    if (!isObject(body)) return reply(badRequest("a wire request is a JSON object"), 400);
    if (body.wire !== WIRE) {
      return reply(badRequest(`wire ${JSON.stringify(body.wire)} is not spoken here; this store speaks ${WIRE}`), 400);
    }
    if (body.op === "hello") return reply({ ok: true, result: { wire: WIRE, store: STORE } });
    if (typeof body.scope !== "string" || body.scope === "") {
      return reply(badRequest("scope must name the scope, a non-empty string"), 400);
    }
    const scope = env.SCOPES.get(env.SCOPES.idFromName(body.scope));
    return reply(await scope.call(body));
  },
};

function reply(value, status = 200) {
  return new Response(JSON.stringify(value), {
    status,
    headers: { "content-type": "application/json" },
  });
}
