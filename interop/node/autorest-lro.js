'use strict';
// The AutoRest test server (@microsoft.azure/autorest.testserver, Microsoft's
// mock of the conventions Azure SDK generators are tested against), started
// as its own CLI does (`autorest-testserver run`: ApiMockApp with all its
// routes), for the long-running-operation routes under /lro/ and the 303
// redirect under /http/redirect/. None of the LRO answers are ours: every
// route is the package's. This file only
//   - binds 127.0.0.1 on PORT (0 = any) and prints
//     "autorest-lro listening on http://127.0.0.1:PORT" when ready;
//   - adds GET /__health (200) for the suite's readiness check;
//   - keeps the coverage reports the server writes on every hit in a
//     temporary folder removed on exit, and its logger quiet (LOG_LEVEL=info
//     shows every route and request).
// interop/LRO-SERVERS.md says what each route answers.
const fs = require('fs');
const os = require('os');
const path = require('path');
const harness = require('./harness');
const { ApiMockApp } = require('@microsoft.azure/autorest.testserver/dist/app');
const { logger } = require('@microsoft.azure/autorest.testserver/dist/logger');

logger.level = process.env.LOG_LEVEL || 'warn';
const cfg = harness.config();
const coverageDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'autorest-lro-'));
process.on('exit', () => fs.rmSync(coverageDirectory, { recursive: true, force: true }));

const app = new ApiMockApp({ port: cfg.port, coverageDirectory, appendCoverage: false });
app.server.use('/__health', (req, res) => res.status(200).json({ ok: true }));
// MockApiServer.start calls express's listen(port, callback): the same, on
// the loopback address only, announcing the port once it is bound.
const express = app.server.app;
const listen = express.listen.bind(express);
express.listen = (port, callback) => {
  const server = listen(port, cfg.host, () => {
    if (callback) callback();
    harness.announce('autorest-lro', server);
  });
  return server;
};
app.start().catch((err) => {
  console.error(err);
  process.exit(1);
});
