'use strict';
// A payments API on Express with express-idempotency (Ville de Montréal), set
// up as its README says: the middleware on the route, its default in-memory
// data adapter, and the route handler returning early on a "hit".
const express = require('express');
const { idempotency, getSharedIdempotencyService } = require('express-idempotency');
const harness = require('./harness');

const cfg = harness.config();
const app = express();
app.use(harness.front(cfg.keyHeader));
app.use(express.json());
app.post('/payments', idempotency({ idempotencyKeyHeader: cfg.keyHeader }), async (req, res, next) => {
  // "To prevent transaction processing to occurs, there is a hit function
  // which determine if the idempotency middleware did process the request."
  if (getSharedIdempotencyService().isHit(req)) {
    return;
  }
  try {
    const record = await harness.createPayment(req.body, req.headers, cfg.keyHeader);
    res.status(201).json(record);
  } catch (err) {
    // "the middleware must be aware of the error": reportError removes the key.
    await getSharedIdempotencyService().reportError(req);
    next(err);
  }
});
const server = app.listen(cfg.port, cfg.host, () => harness.announce('express-idempotency', server));
