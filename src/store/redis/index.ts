// Redis backends: placeholder until issue 5.
import type { Logger } from 'pino';
import type { Config } from '../../config.ts';
import type { Backends } from '../../assemble.ts';

export async function openRedisBackends(_config: Config, _log: Logger): Promise<Backends> {
  throw new Error('EPHEMAIL_STORE=redis:// is not supported by this build yet');
}
