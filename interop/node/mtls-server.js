'use strict';
// A server that requires a client certificate, for the interop suite's
// mutual-TLS rows (../mtls_test.go): Node's own https server with
// requestCert and rejectUnauthorized, which refuses a certificate it does
// not trust by closing the connection without a TLS alert (during the
// handshake with TLS 1.2, right after it with TLS 1.3). Built-in modules
// only.
//
// Environment: SERVER_CERT and SERVER_KEY (PEM files of its certificate),
// CLIENT_CA (PEM file of the CA it trusts for client certificates),
// TLS_VERSION ("TLSv1.2" or "TLSv1.3": the only version it speaks), PORT
// (of the control server; 0: any).
//
// The https server answers 201 {"handled": n} to any request it reads
// whole. The control server (plain http) answers GET /__health with 200
// and GET /__stats with {"connections", "secure", "handled",
// "clientErrors"}: TCP connections accepted by the https server, those
// whose handshake it completed and kept, requests its handler read, and
// the TLS errors it reported (the refusals among them). Prints
// "mtls-server listening on http://127.0.0.1:PORT" (control) and
// "mtls-server https on https://127.0.0.1:PORT" when ready.

const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');

const version = process.env.TLS_VERSION || 'TLSv1.3';
const stats = { connections: 0, secure: 0, handled: 0, clientErrors: [] };

const server = https.createServer({
  cert: fs.readFileSync(process.env.SERVER_CERT),
  key: fs.readFileSync(process.env.SERVER_KEY),
  ca: fs.readFileSync(process.env.CLIENT_CA),
  requestCert: true,
  rejectUnauthorized: true,
  minVersion: version,
  maxVersion: version,
}, (req, res) => {
  req.resume();
  req.on('end', () => {
    stats.handled++;
    res.writeHead(201, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ handled: stats.handled }));
  });
});
server.on('connection', () => { stats.connections++; });
server.on('secureConnection', (s) => { if (s.authorized) stats.secure++; });
server.on('tlsClientError', (err) => { stats.clientErrors.push(err.code || err.message); });

const control = http.createServer((req, res) => {
  if (req.url === '/__health') {
    res.writeHead(200);
    res.end('ok');
    return;
  }
  if (req.url === '/__stats') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(stats));
    return;
  }
  res.writeHead(404);
  res.end();
});

server.listen(0, '127.0.0.1', () => {
  control.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
    console.log(`mtls-server https on https://127.0.0.1:${server.address().port}`);
    console.log(`mtls-server listening on http://127.0.0.1:${control.address().port}`);
  });
});
