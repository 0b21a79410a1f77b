// The Redis bus: wake-ups across nodes through Redis pub/sub. ONE subscriber connection per node,
// subscribed once to one channel; each message fans out locally to the waiters of its address. A
// node delivers its own publishes locally at once and ignores their echo. When the subscriber
// reconnects after an outage every local waiter is woken once, so mail stored meanwhile is seen.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { call, closeClient, type RedisClient } from '../redis/client.ts';
import type { Bus } from './bus.ts';
import { createMemoryBus } from './memory.ts';

export interface RedisBusOptions {
  /** Connection for PUBLISH (shared with the store). */
  publisher: RedisClient;
  /** A dedicated connection, put into subscribe mode here and closed by close(). */
  subscriber: RedisClient;
  channel: string;
  /** Redis Cluster: publishes may take different masters, so cross-node order is not kept. */
  cluster?: boolean;
  log?: Logger;
}

export function createRedisBus(options: RedisBusOptions): Bus {
  const { publisher, subscriber, channel, log } = options;
  const node = randomUUID();
  const local = createMemoryBus();
  const addresses = new Set<string>();
  let lost = false;

  subscriber.on('message', (ch: string, message: string) => {
    if (ch !== channel) return;
    const tab1 = message.indexOf('\t');
    const tab2 = message.indexOf('\t', tab1 + 1);
    if (tab1 < 0 || tab2 < 0 || message.slice(0, tab1) === node) return;
    local.deliverLocal(message.slice(tab2 + 1), message.slice(tab1 + 1, tab2));
  });
  subscriber.on('close', () => {
    lost = true;
  });
  subscriber.on('ready', () => {
    if (!lost) return;
    lost = false;
    log?.info('bus subscriber reconnected; waking local waiters to re-check');
    for (const a of [...addresses]) local.deliverLocal(a, '');
  });
  subscriber.on('error', (err: Error) => log?.debug({ err }, 'bus subscriber error'));
  void (subscriber.subscribe(channel) as Promise<unknown>).catch((err: unknown) => log?.warn({ err }, 'bus subscribe failed; will retry on reconnect'));

  const counts = new Map<string, number>();
  return {
    capabilities: { orderedAcrossNodes: !options.cluster },
    async publish(address, emailId) {
      local.deliverLocal(address, emailId);
      await call(() => publisher.publish(channel, `${node}\t${emailId}\t${address}`));
    },
    subscribe(address, listener) {
      const unsubscribe = local.subscribe(address, listener);
      counts.set(address, (counts.get(address) ?? 0) + 1);
      addresses.add(address);
      let done = false;
      return () => {
        if (done) return;
        done = true;
        unsubscribe();
        const n = (counts.get(address) ?? 1) - 1;
        if (n <= 0) {
          counts.delete(address);
          addresses.delete(address);
        } else counts.set(address, n);
      };
    },
    async close() {
      await local.close();
      subscriber.removeAllListeners('message');
      await closeClient(subscriber);
    },
  };
}
