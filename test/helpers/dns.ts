// A DNS server on loopback for the authentication tests (dns2): it answers TXT and A records from a
// zone the test gives, NXDOMAIN for any other name, and counts the questions it got. The service
// under test is pointed at it with EPHEMAIL_DNS_SERVERS: no test ever queries the outside.
import { createSocket } from 'node:dgram';
import dns2 from 'dns2';

const { Packet } = dns2 as unknown as { Packet: { TYPE: Record<string, number>; CLASS: { IN: number }; RCODE: Record<string, number>; createResponseFromRequest(r: unknown): DnsResponse } };
interface DnsResponse { header: { rcode: number; aa?: number }; answers: unknown[] }
interface DnsRequest { questions: { name: string; type: number }[] }

export interface Zone {
  /** name (lowercase) → TXT records, each one string (split into 255-octet pieces on the wire) */
  txt?: Record<string, string[]>;
  /** name → IPv4 addresses */
  a?: Record<string, string[]>;
}

export interface TestDns {
  /** `127.0.0.1:<port>` for EPHEMAIL_DNS_SERVERS */
  server: string;
  /** Questions answered so far, as `TYPE name`. */
  readonly questions: string[];
  close(): Promise<void>;
}

const pieces = (s: string) => {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += 255) out.push(s.slice(i, i + 255));
  return out.length ? out : [''];
};

export async function startDns(zone: Zone): Promise<TestDns> {
  const questions: string[] = [];
  const typeName = (t: number) => Object.entries(Packet.TYPE).find(([, v]) => v === t)?.[0] ?? String(t);
  const server = (dns2 as unknown as { createServer(o: unknown): { listen(o: unknown): Promise<void>; addresses(): { udp: { port: number } }; close(): Promise<void> } }).createServer({
    udp: true,
    handle: (request: DnsRequest, send: (r: DnsResponse) => void) => {
      const response = Packet.createResponseFromRequest(request);
      const [q] = request.questions;
      const name = q.name.toLowerCase().replace(/\.$/, '');
      questions.push(`${typeName(q.type)} ${name}`);
      const txt = zone.txt?.[name];
      const a = zone.a?.[name];
      if (!txt && !a) response.header.rcode = Packet.RCODE.NXDOMAIN;
      else if (q.type === Packet.TYPE.TXT && txt) {
        for (const t of txt) response.answers.push({ name: q.name, type: Packet.TYPE.TXT, class: Packet.CLASS.IN, ttl: 300, data: pieces(t) });
      } else if (q.type === Packet.TYPE.A && a) {
        for (const address of a) response.answers.push({ name: q.name, type: Packet.TYPE.A, class: Packet.CLASS.IN, ttl: 300, address });
      }
      send(response);
    },
  });
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } });
  const port = server.addresses().udp.port;
  return { server: `127.0.0.1:${port}`, questions, close: () => server.close() };
}

/** A loopback UDP port nothing listens on (bound, read, released): a DNS server that is not there. */
export async function deadPort(): Promise<number> {
  const s = createSocket('udp4');
  await new Promise<void>((resolve) => s.bind(0, '127.0.0.1', resolve));
  const { port } = s.address();
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
