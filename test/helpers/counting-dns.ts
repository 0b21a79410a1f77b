// A DNS server on loopback for tests of the verdicts' bounds (dns2): answers A, AAAA, MX and TXT from
// a function of the name, NXDOMAIN for a name without records, TTL 0 (no cache of the service can
// spare a question), and counts every question it gets.
import dns2 from 'dns2';

const { Packet } = dns2 as unknown as { Packet: { TYPE: Record<string, number>; CLASS: { IN: number }; RCODE: Record<string, number>; createResponseFromRequest(r: unknown): { header: { rcode: number }; answers: unknown[] } } };
export type DnsRecord = { type: 'TXT'; data: string } | { type: 'MX'; exchange: string } | { type: 'A' | 'AAAA'; address: string };

export interface CountingDns {
  server: string;
  /** Every question received, as `TYPE name`, in order. */
  readonly questions: string[];
  close(): Promise<void>;
}

/**
 * A DNS server on 127.0.0.1 answering from `zone(name)` (NXDOMAIN for no records at all; TTL 0, so
 * no cache of the service could spare a question) and counting every question.
 */
export async function countingDns(zone: (name: string) => DnsRecord[]): Promise<CountingDns> {
  const questions: string[] = [];
  const typeName = (t: number) => Object.entries(Packet.TYPE).find(([, v]) => v === t)?.[0] ?? String(t);
  const server = (dns2 as unknown as { createServer(o: unknown): { listen(o: unknown): Promise<void>; addresses(): { udp: { port: number } }; close(): Promise<void> } }).createServer({
    udp: true,
    handle: (request: { questions: { name: string; type: number }[] }, send: (r: unknown) => void) => {
      const response = Packet.createResponseFromRequest(request);
      const [q] = request.questions;
      const name = q.name.toLowerCase().replace(/\.$/, '');
      const type = typeName(q.type);
      questions.push(`${type} ${name}`);
      const records = zone(name);
      if (!records.length) response.header.rcode = Packet.RCODE.NXDOMAIN;
      for (const r of records.filter((x) => x.type === type)) {
        const base = { name: q.name, type: q.type, class: Packet.CLASS.IN, ttl: 0 };
        if (r.type === 'TXT') response.answers.push({ ...base, data: r.data.match(/.{1,255}/g) ?? [''] });
        else if (r.type === 'MX') response.answers.push({ ...base, exchange: r.exchange, priority: 10 });
        else response.answers.push({ ...base, address: r.address });
      }
      send(response);
    },
  });
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  return { server: `127.0.0.1:${server.addresses().udp.port}`, questions, close: () => server.close() };
}

