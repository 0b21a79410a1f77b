// The benchmarks' DNS server, in a process of its own (a benchmark that runs smtp-source with
// spawnSync blocks its own event loop, which must not stall the answers): prints its address as one
// line, then serves until its standard input closes (the benchmark ended).
import { startDns } from '../test/helpers/dns.ts';
import { BENCH_ZONE } from './zone.ts';

const dns = await startDns(BENCH_ZONE);
process.stdout.write(`${dns.server}\n`);
process.stdin.resume();
process.stdin.on('end', () => void dns.close().then(() => process.exit(0)));
