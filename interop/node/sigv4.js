'use strict';
// AWS Signature Version 4, the other side, for the interop suite's SigV4
// tests (../sigv4_test.go): one HTTP server on PORT that holds
//   - POST /__sign: AWS's JavaScript signer (@smithy/signature-v4 with
//     @aws-crypto/sha256-js, the signer of AWS's JavaScript SDK v3) signs
//     each request of a JSON list {method, hostname, path, query, headers,
//     body (base64), service, region, date (X-Amz-Date), accessKeyId,
//     secretAccessKey, sessionToken}; it answers the list of the headers it
//     set (authorization, x-amz-date, x-amz-security-token,
//     x-amz-content-sha256). S3 is signed as AWS's S3 client does: the
//     path as sent, X-Amz-Content-Sha256 set; other services with the path
//     escaped again and no X-Amz-Content-Sha256.
//   - /verify/…: a service that verifies SigV4 the way AWS does, with the
//     same signer: it re-signs the request it received (the headers its
//     SignedHeaders names, the body received, the X-Amz-Date sent) with
//     the secret of the access key ID sent and compares. 403
//     SignatureDoesNotMatch, InvalidAccessKeyId, InvalidToken (a session
//     key without its token) or RequestTimeTooSkewed (> 15 min); 200 and
//     {"ok": true, "bytes": n} when it matches; 400
//     XAmzContentSHA256Mismatch when X-Amz-Content-Sha256 is not the
//     body's (as S3 answers).
//   - everything else: s3rver (a fake S3 on the file system), path-style
//     (/bucket/key), bucket "interop" created at start, access key
//     S3RVER / S3RVER.
// Keys of the verifier: ACCESS_KEYS, a JSON object {id: {secret, token}}
// (token: a session key, whose requests must carry it).
//
// Prints "sigv4 listening on http://127.0.0.1:PORT" when ready; GET
// /__health answers 200. Nothing here signs or verifies by hand: the
// HMACs and canonical requests are the signer's.

const crypto = require('crypto');
const http = require('http');
const os = require('os');
const fs = require('fs');
const path = require('path');
const { SignatureV4 } = require('@smithy/signature-v4');
const { Sha256 } = require('@aws-crypto/sha256-js');
const { HttpRequest } = require('@smithy/protocol-http');
const S3rver = require('s3rver');

const keys = JSON.parse(process.env.ACCESS_KEYS || '{}');

// dateOf reads X-Amz-Date (20150830T123600Z) as a Date.
function dateOf(amz) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amz || '');
  if (!m) return null;
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
}

async function sign(c) {
  const s3 = c.service === 's3';
  const signer = new SignatureV4({
    service: c.service,
    region: c.region,
    sha256: Sha256,
    credentials: { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey, sessionToken: c.sessionToken || undefined },
    uriEscapePath: !s3,
    applyChecksum: s3,
  });
  const body = c.body ? Buffer.from(c.body, 'base64') : undefined;
  const req = new HttpRequest({ method: c.method, protocol: 'https:', hostname: c.hostname, path: c.path, query: c.query || {}, headers: { ...c.headers }, body });
  const signed = await signer.sign(req, { signingDate: dateOf(c.date) });
  const out = {};
  for (const h of ['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256']) {
    if (signed.headers[h] !== undefined) out[h] = signed.headers[h];
  }
  return out;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function s3Error(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`);
}

// verify re-signs the request received with the key's secret.
async function verify(req, res) {
  const body = await readBody(req);
  const auth = req.headers['authorization'] || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return s3Error(res, 403, 'IncompleteSignature', 'The Authorization header is not a SigV4 one.');
  const [, id, , region, service, signedHeaders, signature] = m;
  const key = keys[id];
  if (!key) return s3Error(res, 403, 'InvalidAccessKeyId', 'The access key ID is unknown.');
  if (key.token && req.headers['x-amz-security-token'] !== key.token) {
    return s3Error(res, 403, 'InvalidToken', 'The security token included in the request is invalid.');
  }
  const date = dateOf(req.headers['x-amz-date']);
  if (!date || Math.abs(Date.now() - date.getTime()) > 15 * 60 * 1000) {
    return s3Error(res, 403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');
  }
  const sent = req.headers['x-amz-content-sha256'];
  if (sent !== undefined && sent !== crypto.createHash('sha256').update(body).digest('hex')) {
    return s3Error(res, 400, 'XAmzContentSHA256Mismatch', 'The provided x-amz-content-sha256 header does not match what was computed.');
  }
  const url = new URL(req.url, 'http://' + req.headers.host);
  const query = {};
  for (const [k, v] of url.searchParams) query[k] = k in query ? [].concat(query[k], v) : v;
  const headers = {};
  for (const h of signedHeaders.split(';')) {
    if (req.headers[h] === undefined) return s3Error(res, 403, 'SignatureDoesNotMatch', `Signed header ${h} is missing.`);
    headers[h] = Array.isArray(req.headers[h]) ? req.headers[h].join(',') : req.headers[h];
  }
  const signer = new SignatureV4({
    service, region, sha256: Sha256,
    credentials: { accessKeyId: id, secretAccessKey: key.secret, sessionToken: key.token },
    uriEscapePath: service !== 's3', applyChecksum: false,
  });
  const again = await signer.sign(
    new HttpRequest({ method: req.method, protocol: 'http:', hostname: url.hostname, path: url.pathname, query, headers, body: body.length ? body : undefined }),
    { signingDate: date, signableHeaders: new Set(signedHeaders.split(';')) },
  );
  const want = /Signature=([0-9a-f]{64})$/.exec(again.headers['authorization'])[1];
  if (want !== signature) {
    return s3Error(res, 403, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided.');
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ ok: true, bytes: body.length }));
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sigv4-s3rver-'));
  const s3 = new S3rver({ silent: true, directory: dir, configureBuckets: [{ name: 'interop' }], vhostBuckets: false });
  await s3.configureBuckets();
  const s3handler = s3.callback();
  const server = http.createServer((req, res) => {
    const fail = (e) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(e && e.stack || e));
    };
    if (req.url === '/__health') {
      res.writeHead(200);
      return res.end('ok');
    }
    if (req.url === '/__sign' && req.method === 'POST') {
      return readBody(req)
        .then((b) => Promise.all(JSON.parse(b.toString('utf8')).map(sign)))
        .then((out) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(out));
        })
        .catch(fail);
    }
    if (req.url.startsWith('/verify/')) return verify(req, res).catch(fail);
    return s3handler(req, res);
  });
  server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
    const addr = server.address();
    process.stdout.write(`sigv4 listening on http://127.0.0.1:${addr.port}\n`);
  });
  const stop = () => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
