'use strict';
// The test harness shared by the payments APIs in this folder. None of it is
// idempotency logic: that is entirely the third-party middleware's. It holds
//   - the control endpoint (POST /__control) and the counters (GET /__stats),
//     which the middleware never sees;
//   - scripted transient failures, answered in front of the middleware as a
//     load balancer would, so the middleware never stores them;
//   - the payment "work": one in-memory record per processed request, after
//     an optional processing delay, or never (hang) for an orphaned lock.

const http = require('http');

function newState() {
  return {
    delayMs: 0,
    delayCount: 0, // 0: every request; n: the next n processed requests
    hang: false,
    hangCount: 0, // 0: every request while hang; n: the next n
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

let state = newState();

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

function stats() {
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

// front is the first middleware of every app: the control endpoints, the
// counters and the scripted failures. keyHeader is the header the server's
// middleware reads the key from (only for the log).
function front(keyHeader) {
  const kh = keyHeader.toLowerCase();
  return function harnessFront(req, res, next) {
    const path = req.url.split('?')[0];
    if (path === '/__control' && req.method === 'POST') {
      readJSON(req).then((c) => {
        if (c.reset) {
          state = newState();
        }
        if (c.delay_ms !== undefined) state.delayMs = Number(c.delay_ms) || 0;
        if (c.delay_count !== undefined) state.delayCount = Number(c.delay_count) || 0;
        if (c.hang !== undefined) state.hang = Boolean(c.hang);
        if (c.hang_count !== undefined) state.hangCount = Number(c.hang_count) || 0;
        if (c.script !== undefined) state.script = state.script.concat(parseScript(c.script));
        sendJSON(res, 200, { ok: true });
      }, (err) => sendJSON(res, 400, { error: String(err && err.message) }));
      return;
    }
    if (path === '/__stats' && req.method === 'GET') {
      sendJSON(res, 200, stats());
      return;
    }
    if (path === '/__health') {
      sendJSON(res, 200, { ok: true });
      return;
    }
    state.requests++;
    const key = req.headers[kh];
    if (key) state.keys.add(key);
    const start = Date.now();
    const entry = { key: key || '', method: req.method, path: req.url, status: 0, ms: 0 };
    state.log.push(entry);
    if (state.log.length > 500) state.log.shift();
    res.on('finish', () => {
      entry.status = res.statusCode;
      entry.ms = Date.now() - start;
      state.byStatus[res.statusCode] = (state.byStatus[res.statusCode] || 0) + 1;
    });
    res.on('close', () => {
      if (!entry.status) entry.aborted = true;
    });
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
// processing delay (or forever, when hanging) and creates one record.
async function createPayment(body, key) {
  state.handlerCalls++;
  if (state.hang) {
    if (state.hangCount > 0 && --state.hangCount === 0) state.hang = false;
    state.hanging++;
    await new Promise(() => {}); // never answers: the middleware's lock is orphaned
  }
  let delay = state.delayMs;
  if (delay > 0 && state.delayCount > 0 && --state.delayCount === 0) state.delayMs = 0;
  if (delay > 0) await new Promise((r) => setTimeout(r, delay));
  const record = {
    id: `pay_${state.records.length + 1}`,
    amount: body && body.amount,
    currency: (body && body.currency) || 'EUR',
    idempotency_key: key || null,
    created_at: new Date().toISOString(),
  };
  state.records.push(record);
  return record;
}

// listenArgs returns the port (PORT or --port) and key header (KEY_HEADER or
// --key-header, default Idempotency-Key).
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
