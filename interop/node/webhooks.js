'use strict';
// The official webhook-signature libraries, driven by the interop suite's
// differential test (../webhooks_test.go): standardwebhooks (the Standard
// Webhooks reference library), svix (whose Webhook wraps its own pinned
// standardwebhooks) and stripe (stripe-node's webhooks helpers).
//
// Prints "ready" once the libraries are loaded, then reads a JSON list of
// cases on stdin and prints a JSON list of results, in the same order:
//   {op: "sign", lib, secret, id, ts, payload}
//     -> {header}: standardwebhooks' and svix's Webhook.sign (one
//        "v1,<base64>"), or stripe's generateTestHeaderString (the whole
//        Stripe-Signature value).
//   {op: "verify", lib, secrets: [..], headers: {name: value}, payload}
//     -> {ok, errors: [name: message per secret tried], before, after}:
//        each secret in turn (a receiver rotating its secret), Webhook.verify
//        or stripe.webhooks.constructEvent(payload, header, secret, 300);
//        ok when one accepts. before and after are the library's clock
//        (Date.now(), ms), read around the calls: the libraries take no
//        "now", so the test compares at the time they used.
// payload is base64 (the raw body, given to the libraries as a Buffer).
//
// Nothing here is verification logic: that is entirely the libraries'.

const { Webhook: StdWebhook } = require('standardwebhooks');
const { Webhook: SvixWebhook } = require('svix');
const Stripe = require('stripe');

const stripe = new Stripe('sk_test_interop_not_used');

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

function run(c) {
  const body = Buffer.from(c.payload || '', 'base64');
  if (c.op === 'sign') {
    return { header: sign(c, body) };
  }
  const errors = [];
  const before = Date.now();
  let ok = false;
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

process.stdout.write('ready\n');
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const out = JSON.parse(input).map((c) => {
    try {
      return run(c);
    } catch (e) {
      return { fatal: `${e.name}: ${e.message}` };
    }
  });
  process.stdout.write(JSON.stringify(out));
});
