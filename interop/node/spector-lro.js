'use strict';
// Spector (@typespec/spector), the TypeSpec project's mock-API server, serving
// the Azure scenarios of @azure-tools/azure-http-specs as `tsp-spector serve
// <specs>` does (MockApiApp with every mock API of the package), for the
// long-running operations of Azure.Core (azure/core/lro/standard, rpc:
// Operation-Location) and of ARM's operation templates (Azure-AsyncOperation,
// Location). None of the LRO answers are ours: every route is the package's.
// This file only
//   - binds 127.0.0.1 on PORT (0 = any) and prints
//     "spector-lro listening on http://127.0.0.1:PORT" when ready;
//   - adds GET /__health (200) for the suite's readiness check;
//   - sends the coverage file Spector writes on exit to /dev/null, and keeps
//     its logger quiet (LOG_LEVEL=info shows every request).
// Spector reads `git rev-parse HEAD` in the scenarios folder for its coverage
// metadata, so node_modules must be inside a git checkout (this repository).
// interop/LRO-SERVERS.md says what each route answers.
const path = require('path');
const { pathToFileURL } = require('url');
const harness = require('./harness');

// The package exports only its library entry point; the server is what its
// CLI runs, loaded here by file.
const spector = path.join(__dirname, 'node_modules', '@typespec', 'spector', 'dist', 'src');
const specs = path.join(__dirname, 'node_modules', '@azure-tools', 'azure-http-specs', 'specs');
const load = (rel) => import(pathToFileURL(path.join(spector, rel)).href);

async function main() {
  const cfg = harness.config();
  const { logger } = await load('logger.js');
  const { MockApiApp } = await load('app/app.js');
  logger.level = process.env.LOG_LEVEL || 'warn';
  const app = new MockApiApp({ port: cfg.port, scenarioPath: [specs], coverageFile: '/dev/null' });
  app.server.use('/__health', (req, res) => res.status(200).json({ ok: true }));
  // MockApiServer.start calls express's listen(port, callback): the same,
  // on the loopback address only.
  const express = app.server.app;
  const listen = express.listen.bind(express);
  let server;
  express.listen = (port, callback) => (server = listen(port, cfg.host, callback));
  await app.start();
  harness.announce('spector-lro', server);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
