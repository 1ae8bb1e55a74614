'use strict';
// An OAuth 2.0 authorization server for the interop suite's OAuth 2.0 row
// (../oauth2_test.go): oidc-provider (panva's, OpenID-certified) with only
// the client-credentials grant (RFC 6749 §4.4), opaque access tokens of
// TOKEN_TTL seconds (default 5), token introspection (RFC 7662) and
// revocation (RFC 7009).
//
// Clients:
//   payments-worker / CLIENT_SECRET: the worker's client, kept in the
//     provider's adapter (a dynamic client), so that POST /__revoke can
//     remove it mid-run: its next token request is refused (invalid_client).
//   payments-api / API_SECRET: the API's, which introspects the tokens it
//     receives (POST /token/introspection with Basic authentication).
//
// GET /__health answers 200; "listening on http://127.0.0.1:<port>" is
// printed once it serves. Nothing here is OAuth logic: that is
// oidc-provider's own.

const http = require('node:http');

const ttl = Number(process.env.TOKEN_TTL || 5);
const workerSecret = process.env.CLIENT_SECRET || 'worker-secret-not-set-0001';
const apiSecret = process.env.API_SECRET || 'api-secret-not-set-0001';

// store is the adapter's storage: one Map for every model, keyed
// "<model>:<id>", entries dropped at their expiry.
const store = new Map();

class Adapter {
  constructor(model) { this.model = model; }
  key(id) { return `${this.model}:${id}`; }
  async upsert(id, payload, expiresIn) {
    const exp = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : Infinity;
    store.set(this.key(id), { payload, exp });
  }
  async find(id) {
    const e = store.get(this.key(id));
    if (!e) return undefined;
    if (e.exp <= Date.now()) { store.delete(this.key(id)); return undefined; }
    return e.payload;
  }
  async findByUid() { return undefined; }
  async findByUserCode() { return undefined; }
  async consume(id) { const p = await this.find(id); if (p) p.consumed = Math.floor(Date.now() / 1000); }
  async destroy(id) { store.delete(this.key(id)); }
  async revokeByGrantId() {}
}

const workerClient = {
  client_id: 'payments-worker',
  client_secret: workerSecret,
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  token_endpoint_auth_method: 'client_secret_basic',
};

async function main() {
  const { default: Provider } = await import('oidc-provider');
  const server = http.createServer();
  await new Promise((resolve) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    adapter: Adapter,
    clients: [{
      client_id: 'payments-api',
      client_secret: apiSecret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    features: {
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      devInteractions: { enabled: false },
    },
    ttl: { ClientCredentials: () => ttl },
  });
  let requests = 0;
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  await new Adapter('Client').upsert('payments-worker', workerClient);
  const callback = provider.callback();
  server.on('request', (req, res) => {
    if (req.url === '/__health') { res.end('ok'); return; }
    if (req.method === 'POST' && req.url === '/__revoke') {
      store.delete('Client:payments-worker');
      res.end('revoked');
      return;
    }
    if (req.url === '/token') requests++;
    if (req.url === '/__stats') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ token_requests: requests }));
      return;
    }
    callback(req, res);
  });
  console.log(`oidc-provider: token TTL ${ttl} s; listening on ${issuer}`);
}

main().catch((err) => { console.error(err); process.exit(1); });
