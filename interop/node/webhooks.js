'use strict';
// The official webhook-signature libraries, driven by the interop suite's
// differential test (../webhooks_test.go): standardwebhooks (the Standard
// Webhooks reference library), svix (whose Webhook wraps its own pinned
// standardwebhooks), stripe (stripe-node's webhooks helpers) and
// @octokit/webhooks-methods (GitHub's, for X-Hub-Signature-256: a plain
// HMAC-SHA256 of the body, "sha256=" and hex).
//
// Prints "ready" once the libraries are loaded, then reads a JSON list of
// cases on stdin and prints a JSON list of results, in the same order:
//   {op: "sign", lib, secret, id, ts, payload}
//     -> {header}: standardwebhooks' and svix's Webhook.sign (one
//        "v1,<base64>"), stripe's generateTestHeaderString (the whole
//        Stripe-Signature value), or octokit's sign ("sha256=<hex>").
//   {op: "verify", lib, secrets: [..], headers: {name: value}, payload}
//     -> {ok, errors: [name: message per secret tried], before, after}:
//        each secret in turn (a receiver rotating its secret), Webhook.verify
//        or stripe.webhooks.constructEvent(payload, header, secret, 300);
//        ok when one accepts; octokit's verifyWithFallback takes them all
//        at once (its own rotation), and its false is a rejection. before and after are the library's clock
//        (Date.now(), ms), read around the calls: the libraries take no
//        "now", so the test compares at the time they used.
// payload is base64 (the raw body, given to the libraries as a Buffer; to
// octokit, which takes only a string, decoded as UTF-8).
//
// Nothing here is verification logic: that is entirely the libraries'.

const { Webhook: StdWebhook } = require('standardwebhooks');
const { Webhook: SvixWebhook } = require('svix');
const Stripe = require('stripe');

const stripe = new Stripe('sk_test_interop_not_used');
let octokit; // ESM only: imported in main

// The header octokit's signature travels in (lower-case, as the cases name
// headers).
const githubHeader = 'x-hub-signature-256';

function sign(c, body) {
  switch (c.lib) {
    case 'standardwebhooks':
      return new StdWebhook(c.secret).sign(c.id, new Date(c.ts * 1000), body);
    case 'svix':
      return new SvixWebhook(c.secret).sign(c.id, new Date(c.ts * 1000), body);
    case 'stripe':
      return stripe.webhooks.generateTestHeaderString({
        payload: body.toString('utf8'),
        secret: c.secret,
        timestamp: c.ts,
      });
    case '@octokit/webhooks-methods':
      return octokit.sign(c.secret, body.toString('utf8'));
  }
  throw new Error(`unknown lib ${c.lib}`);
}

function verifyOne(c, secret, body) {
  switch (c.lib) {
    case 'standardwebhooks':
      return new StdWebhook(secret).verify(body, c.headers);
    case 'svix':
      return new SvixWebhook(secret).verify(body, c.headers);
    case 'stripe':
      return stripe.webhooks.constructEvent(body, c.headers['stripe-signature'], secret, 300);
  }
  throw new Error(`unknown lib ${c.lib}`);
}

async function run(c) {
  const body = Buffer.from(c.payload || '', 'base64');
  if (c.op === 'sign') {
    return { header: await sign(c, body) };
  }
  const errors = [];
  const before = Date.now();
  let ok = false;
  if (c.lib === '@octokit/webhooks-methods') {
    try {
      ok = await octokit.verifyWithFallback(c.secrets[0], body.toString('utf8'), c.headers[githubHeader], c.secrets.slice(1));
      if (!ok) errors.push('verifyWithFallback: false');
    } catch (e) {
      errors.push(`${e.name || e.constructor.name}: ${String(e.message).split('\n')[0]}`);
    }
    return { ok, errors, before, after: Date.now() };
  }
  for (const secret of c.secrets) {
    try {
      verifyOne(c, secret, body);
      ok = true;
      break;
    } catch (e) {
      errors.push(`${e.name || e.constructor.name}: ${String(e.message).split('\n')[0]}`);
    }
  }
  const after = Date.now();
  return { ok, errors, before, after };
}

async function main() {
  octokit = await import('@octokit/webhooks-methods');
  process.stdout.write('ready\n');
  let input = '';
  process.stdin.setEncoding('utf8');
  for await (const d of process.stdin) input += d;
  const out = [];
  for (const c of JSON.parse(input)) {
    try {
      out.push(await run(c));
    } catch (e) {
      out.push({ fatal: `${e.name}: ${e.message}` });
    }
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
