// What the receiver relies on in smtp-server beyond its options, checked against the installed
// version, so that an upgrade that changes it fails here rather than in a sender's log:
// - smtp-server still adds an enhanced status code of its own choosing to a handler's reply, even one
//   whose text names its own (550 → 5.1.1). When this test fails, smtp-server sends such replies as
//   written: delete the enhanced-code part of wrapSend (src/smtp/replies.ts) and this test.
// - the receiver changes nothing process-wide: a plain SMTPServer in the same process (this file loads
//   src/smtp/server.ts) keeps smtp-server's own behaviour.
// - during onConnect the connection is in the public `connections` set with the session onConnect
//   got, and its public `send` is what the replies go through (how the receiver finds and keeps its
//   connections); the receiver's exact replies are asserted in receiver.test.ts and caps.test.ts.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { SMTPServer } from 'smtp-server';
import '../../src/smtp/server.ts';
import { SmtpClient } from '../helpers/smtp.ts';

type Connection = SMTPServer['connections'] extends Set<infer C> ? C : never;

async function plainServer(onConnect: (server: SMTPServer, session: Connection['session']) => void): Promise<{ server: SMTPServer; port: number }> {
  const server: SMTPServer = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    hideENHANCEDSTATUSCODES: false, // as the receiver (off by default)
    logger: false,
    onConnect(session, callback) {
      onConnect(server, session);
      callback();
    },
    onRcptTo(_address, _session, callback) {
      callback(Object.assign(new Error('5.1.2 No such domain here'), { responseCode: 550 }));
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.server.address() as AddressInfo).port };
}

async function rcptReply(port: number): Promise<string> {
  const { client } = await SmtpClient.open(port);
  await client.cmd('EHLO contract.example');
  await client.cmd('MAIL FROM:<a@sender.example>');
  const reply = await client.cmd('RCPT TO:<b@elsewhere.example>');
  await client.quit();
  return `${reply.code} ${reply.text}`;
}

test('smtp-server adds its own enhanced code to a reply that names one (so the receiver keeps its own per connection)', async () => {
  const { server, port } = await plainServer(() => undefined);
  try {
    assert.equal(await rcptReply(port), '550 5.1.1 5.1.2 No such domain here');
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

test('during onConnect the connection is in `connections` with its session, and its `send` carries the replies', async () => {
  const seen: string[] = [];
  const { server, port } = await plainServer((s, session) => {
    const mine = [...s.connections].filter((c) => c.session === session);
    assert.equal(mine.length, 1, 'exactly one connection has this session');
    const send = mine[0].send.bind(mine[0]);
    mine[0].send = (code, data, context) => {
      seen.push(`${code} ${String(data)}`);
      send(code, data, context === undefined && code === 550 ? false : context);
    };
  });
  try {
    assert.equal(await rcptReply(port), '550 5.1.2 No such domain here');
    assert.ok(seen.includes('550 5.1.2 No such domain here'), `the reply went through send: ${seen.join(' | ')}`);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
