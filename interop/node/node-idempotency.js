'use strict';
// A payments API on NestJS (Express platform) with @node-idempotency/nestjs,
// set up as its README says: NodeIdempotencyModule.forRootAsync with the
// in-memory storage adapter, and @Idempotent() on the handler. Plain
// JavaScript, so the decorators are applied by hand.
require('reflect-metadata');
const { NestFactory } = require('@nestjs/core');
const { Module, Controller, Post, Body, Headers, HttpCode } = require('@nestjs/common');
const { NodeIdempotencyModule, Idempotent } = require('@node-idempotency/nestjs');
const harness = require('./harness');

const cfg = harness.config();

class PaymentsController {
  async create(body, headers) {
    return harness.createPayment(body, headers, cfg.keyHeader);
  }
}
const proto = PaymentsController.prototype;
const desc = () => Object.getOwnPropertyDescriptor(proto, 'create');
Reflect.defineMetadata('design:paramtypes', [Object, Object], proto, 'create');
Body()(proto, 'create', 0);
Headers()(proto, 'create', 1);
for (const d of [Idempotent(), HttpCode(201), Post()]) {
  Object.defineProperty(proto, 'create', d(proto, 'create', desc()) || desc());
}
Controller('payments')(PaymentsController);

class AppModule {}
Module({
  imports: [
    NodeIdempotencyModule.forRootAsync({
      storage: { adapter: 'memory' },
      idempotencyKey: cfg.keyHeader,
      // A payments API rejects a request without a key (400) rather than
      // processing it unprotected.
      enforceIdempotency: process.env.ENFORCE_KEY !== 'false',
    }),
  ],
  controllers: [PaymentsController],
})(AppModule);

async function main() {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  app.use(harness.front(cfg.keyHeader));
  await app.listen(cfg.port, cfg.host);
  harness.announce('node-idempotency', app.getHttpServer());
}
main().catch((err) => {
  console.error(err);
  process.exit(1);
});
