// The page's requests: the same /api/v1 routes, schemas and error envelope as every client. The
// browser marks them same-origin (Sec-Fetch-Site), which makes them the "web" caller: counted in the
// network's web bucket, never in the API quota, and no key needed for the live stream
// (docs/security.md "The web caller").
const enc = encodeURIComponent;
const inbox = (address) => '/api/v1/inboxes/' + enc(address);
/** Before every email id (UUIDv7): a stream from it replays all the inbox still holds. */
const FIRST_ID = '00000000-0000-7000-8000-000000000000';

/** The error envelope's message, or the status when there is none. */
export async function apiError(res) {
  try {
    const body = await res.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch {
    // not JSON
  }
  return 'Request failed (' + res.status + ')';
}

async function json(res) {
  if (!res.ok) throw new Error(await apiError(res));
  return res.json();
}

export const createInbox = () => fetch('/api/v1/inboxes', { method: 'POST' }).then(json).then((b) => b.data);

/** The newest 100 emails (summaries, newest first) and the server's time of the answer. */
export async function listEmails(address) {
  const res = await fetch(inbox(address) + '/emails?limit=100');
  const body = await json(res);
  return { emails: body.data, serverMs: Date.parse(res.headers.get('date') || '') };
}

/** The ids of the newest 100 emails whose body text matches (the API's `text` filter). */
export const searchIds = (address, q) =>
  fetch(inbox(address) + '/emails?limit=100&text=' + enc(q)).then(json).then((b) => b.data.map((e) => e.id));

/** Row previews (preview line, best code, attachments not kept) of up to 50 ids. */
export const previews = (address, ids) => fetch(inbox(address) + '/previews?ids=' + ids.map(enc).join(',')).then(json).then((b) => b.data);

export const purgeInbox = (address) => fetch(inbox(address) + '/emails', { method: 'DELETE' }).then(json).then((b) => b.data);

/** Deletes one email; null when done (or already gone), else the error message. */
export async function deleteEmail(id) {
  const res = await fetch('/api/v1/emails/' + enc(id), { method: 'DELETE' });
  return res.ok || res.status === 404 ? null : apiError(res);
}

/** The message as received: its bytes, or the error message. */
export async function rawEmail(id) {
  const res = await fetch('/api/v1/emails/' + enc(id) + '/raw');
  if (!res.ok) return { error: await apiError(res) };
  return { bytes: new Uint8Array(await res.arrayBuffer()) };
}

/**
 * Follows an inbox live: each (re)connection lists it (the truth, which also drops mail deleted
 * elsewhere), then opens the API's event stream from the newest email listed, so nothing that
 * arrives in between is missed. A stream ends after a few minutes and the page reconnects at once; a
 * stream refused (too many pages open from this network) leaves the listed mail shown, and the page
 * lists again on each retry, with backoff.
 */
export function follow(address, { onList, onMail, onStatus }) {
  let source = null;
  let retry = 0;
  let newest = null;
  let stopped = false;
  async function connect() {
    try {
      const listed = await listEmails(address);
      onList(listed);
      newest = listed.emails[0]?.id ?? newest;
    } catch {
      // offline or refused: the stream below resumes from the newest email shown
    }
    if (stopped) return;
    let opened = false;
    source = new EventSource(inbox(address) + '/events?since=' + enc(newest || FIRST_ID));
    source.addEventListener('open', () => {
      opened = true;
      retry = 0;
      onStatus('live');
    });
    source.addEventListener('email', (ev) => {
      const summary = JSON.parse(ev.data);
      if (!newest || summary.id > newest) newest = summary.id;
      onMail(summary);
    });
    source.addEventListener('error', () => {
      source.close();
      if (stopped) return;
      if (opened) {
        onStatus('reconnecting');
        setTimeout(connect, 500); // the stream's life ended: a fresh list, then a new stream
        return;
      }
      onStatus('not-live');
      retry = Math.min(retry + 1, 6);
      setTimeout(connect, 1000 * 2 ** retry);
    });
  }
  void connect();
  return () => {
    stopped = true;
    source?.close();
  };
}
