'use strict';
// The test harness shared by the payments APIs in this folder. None of it is
// idempotency logic: that is entirely the third-party middleware's. It holds
//   - the control endpoint (POST /__control) and the counters (GET /__stats),
//     which the middleware never sees;
//   - scripted transient failures, answered in front of the middleware as a
//     load balancer would, so the middleware never stores them;
//   - the payment "work": one in-memory record per processed request, after
//     an optional processing delay, or never (hang) for an orphaned lock.
//
// Tenants: a path prefix /t/<tenant>/ selects a tenant of its own settings
// and counters (POST /t/a/payments, POST /t/a/__control, GET /t/a/__stats),
// so that concurrent tests share one server without sharing knobs. The
// prefix is stripped, like a front proxy routing by path, before the
// middleware sees the request: it sees POST /payments. Without a prefix the
// tenant is "".

const http = require('http');

const TENANT_HEADER = 'x-interop-tenant';

function newState() {
  return {
    delayMs: 0,
    delayCount: 0, // 0: every processed request; n: the next n
    hang: false,
    hangCount: 0, // 0: every processed request while hang; n: the next n
    releaseAfter409: 0, // the next processed request waits for this many 409s
    on409: [], // its waiter: {n, resolve}
    script: [],
    requests: 0,
    handlerCalls: 0,
    byStatus: {},
    keys: new Set(),
    records: [],
    log: [],
    hanging: 0,
  };
}

const tenants = new Map();

function tenant(name) {
  let s = tenants.get(name);
  if (!s) {
    s = newState();
    tenants.set(name, s);
  }
  return s;
}

// parseScript reads "503,429:1" into [{status: 503}, {status: 429, retryAfter: "1"}].
function parseScript(s) {
  const steps = [];
  for (const raw of String(s || '').split(',')) {
    const item = raw.trim();
    if (!item) continue;
    const [code, ra] = item.split(':');
    const status = Number(code);
    if (!Number.isInteger(status) || status < 100 || status > 599) {
      throw new Error(`script item "${item}": want STATUS or STATUS:RETRY-AFTER`);
    }
    steps.push(ra === undefined ? { status } : { status, retryAfter: ra });
  }
  return steps;
}

function readJSON(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (!text.trim()) return resolve({});
      try {
        resolve(JSON.parse(text));
      } catch (e) {
        reject(e);
      }
    });
    req.on('error', reject);
  });
}

function sendJSON(res, status, v) {
  const body = JSON.stringify(v);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

function stats(state) {
  return {
    requests: state.requests,
    handler_calls: state.handlerCalls,
    records: state.records.length,
    distinct_keys: state.keys.size,
    hanging: state.hanging,
    by_status: state.byStatus,
    log: state.log,
  };
}

function control(name, c) {
  if (c.reset) tenants.set(name, newState());
  const state = tenant(name);
  if (c.delay_ms !== undefined) state.delayMs = Number(c.delay_ms) || 0;
  if (c.delay_count !== undefined) state.delayCount = Number(c.delay_count) || 0;
  if (c.hang !== undefined) state.hang = Boolean(c.hang);
  if (c.hang_count !== undefined) state.hangCount = Number(c.hang_count) || 0;
  if (c.release_after_409 !== undefined) state.releaseAfter409 = Number(c.release_after_409) || 0;
  if (c.script !== undefined) state.script = state.script.concat(parseScript(c.script));
}

const tenantPrefix = /^\/t\/([A-Za-z0-9_.-]{1,200})(\/.*)$/;

// front is the first middleware of every app: tenants, the control
// endpoints, the counters and the scripted failures. keyHeader is the
// header the server's middleware reads the key from (only for the log).
function front(keyHeader) {
  const kh = keyHeader.toLowerCase();
  return function harnessFront(req, res, next) {
    let name = '';
    const m = tenantPrefix.exec(req.url);
    if (m) {
      name = m[1];
      req.url = m[2];
    }
    // The handler learns its tenant from this header, set by the front only.
    req.headers[TENANT_HEADER] = name;
    const path = req.url.split('?')[0];
    if (path === '/__control' && req.method === 'POST') {
      readJSON(req).then((c) => {
        control(name, c);
        sendJSON(res, 200, { ok: true });
      }).catch((err) => sendJSON(res, 400, { error: String(err && err.message) }));
      return;
    }
    if (path === '/__stats' && req.method === 'GET') {
      sendJSON(res, 200, stats(tenant(name)));
      return;
    }
    if (path === '/__health') {
      sendJSON(res, 200, { ok: true });
      return;
    }
    const state = tenant(name);
    state.requests++;
    const key = req.headers[kh];
    if (key) state.keys.add(key);
    const start = Date.now();
    const entry = { key: key || '', method: req.method, path: req.url, status: 0, ms: 0 };
    state.log.push(entry);
    if (state.log.length > 500) state.log.shift();
    // The answer is counted when it is sent, even to a client that has gone
    // (an attempt that timed out): "late" says it never arrived.
    let gone = false;
    res.on('close', () => {
      if (!res.writableFinished) gone = true;
    });
    const answered = (status) => {
      if (entry.status) return;
      entry.status = status;
      entry.ms = Date.now() - start;
      if (gone) entry.late = true;
      state.byStatus[status] = (state.byStatus[status] || 0) + 1;
      if (status === 409) {
        const count = state.byStatus[409];
        state.on409 = state.on409.filter((w) => (count >= w.n ? (w.resolve(), false) : true));
      }
    };
    const writeHead = res.writeHead;
    res.writeHead = function (...args) {
      answered(typeof args[0] === 'number' ? args[0] : res.statusCode);
      return writeHead.apply(this, args);
    };
    const end = res.end;
    res.end = function (...args) {
      answered(res.statusCode); // also when the client has gone: Node then writes nothing
      return end.apply(this, args);
    };
    const step = state.script.shift();
    if (step) {
      entry.scripted = true;
      res.statusCode = step.status;
      if (step.retryAfter !== undefined) res.setHeader('Retry-After', step.retryAfter);
      res.setHeader('Content-Type', 'text/plain; charset=utf-8');
      res.end(`${http.STATUS_CODES[step.status] || 'error'} (scripted)\n`);
      return;
    }
    next();
  };
}

// createPayment is the payment work of one processed request: it waits the
// processing delay or for the duplicates (or forever, when hanging) and
// creates one record.
// headers are the request's (for the tenant and the key).
async function createPayment(body, headers, keyHeader) {
  const state = tenant(headers[TENANT_HEADER] || '');
  state.handlerCalls++;
  if (state.hang) {
    if (state.hangCount > 0 && --state.hangCount === 0) state.hang = false;
    state.hanging++;
    await new Promise(() => {}); // never answers: the middleware's lock is orphaned
  }
  // A processing time counted in duplicates rather than in seconds: the
  // request is done once the tenant has answered n requests 409 (for tests
  // whose client clock skips ahead, such as Temporal's test environment).
  const n = state.releaseAfter409;
  if (n > 0) {
    state.releaseAfter409 = 0;
    // Released as the n-th 409 is written: the record and the middleware's
    // stored response are in place before the next request is read.
    if ((state.byStatus[409] || 0) < n) {
      await new Promise((resolve) => state.on409.push({ n, resolve }));
    }
  }
  const delay = state.delayMs;
  if (delay > 0 && state.delayCount > 0 && --state.delayCount === 0) state.delayMs = 0;
  if (delay > 0) await new Promise((r) => setTimeout(r, delay));
  const record = {
    id: `pay_${state.records.length + 1}`,
    amount: body && body.amount,
    currency: (body && body.currency) || 'EUR',
    idempotency_key: headers[keyHeader.toLowerCase()] || null,
    created_at: new Date().toISOString(),
  };
  state.records.push(record);
  return record;
}

// config returns the port (PORT or --port; 0 picks a free one) and the key
// header (KEY_HEADER or --key-header, default Idempotency-Key).
function config() {
  const args = process.argv.slice(2);
  const arg = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const port = Number(arg('--port') || process.env.PORT || 0);
  const keyHeader = arg('--key-header') || process.env.KEY_HEADER || 'Idempotency-Key';
  return { port, keyHeader, host: '127.0.0.1' };
}

function announce(name, server) {
  const addr = server.address();
  process.stdout.write(`${name} listening on http://127.0.0.1:${addr.port}\n`);
}

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

module.exports = { front, createPayment, config, announce };
