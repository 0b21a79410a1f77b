// The inbox page: the live list (api.js follow), row previews, search, keyboard, delete and empty.
import { deleteEmail, follow, previews, purgeInbox, searchIds } from './api.js';
import { $, el, inboxPath } from './ui.js';

/** "Alice Example" <alice@x> → Alice Example (the full header on hover). */
function displayName(sender) {
  const m = /^\s*"?([^"<]*?)"?\s*<([^<>]*)>\s*$/.exec(sender || '');
  if (m) return m[1].trim() || m[2].trim();
  return (sender || '').trim();
}

/** Read state stays in this browser (localStorage), per email id; ids expire with their mail. */
function readIds() {
  try {
    return new Set(JSON.parse(localStorage.getItem('ephemail:read') || '[]'));
  } catch {
    return new Set();
  }
}

const CLIP_PATH = 'M16.5 6.5v10a4.5 4.5 0 0 1-9 0V5a3 3 0 0 1 6 0v10.5a1.5 1.5 0 0 1-3 0V6.5';
const TRASH_PATH = 'M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3';

/** A 1em line icon (inline SVG, drawn in the text colour); decorative: the control names itself. */
function icon(d) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', 'icon');
  const path = document.createElementNS(ns, 'path');
  path.setAttribute('d', d);
  svg.append(path);
  return svg;
}

const STATUS = {
  live: [true, 'Live: new mail appears here by itself'],
  reconnecting: [false, 'Reconnecting…'],
  'not-live': [false, 'Not live right now (too many open pages from your network?): the list is refreshed every few seconds'],
};

export function inboxView({ toast, clock }) {
  const address = document.body.dataset.address;
  const list = $('#emails');
  const emptyState = $('#empty-state');
  const count = $('#count');
  const emptyButton = $('#empty');
  const search = $('#search');
  const emails = new Map(); // id -> summary
  const read = readIds();
  const baseTitle = document.title;
  let unseen = 0;
  const rowOf = (id) => list.querySelector('li[data-id="' + CSS.escape(id) + '"]');

  function row(m, fresh) {
    const li = el('li', 'row' + (fresh ? ' new' : '') + (read.has(m.id) ? '' : ' unread'));
    li.dataset.id = m.id;
    li.dataset.search = ((m.sender || '') + ' ' + (m.subject || '')).toLowerCase();
    const a = el('a', 'row-link');
    a.href = inboxPath(address) + '/' + encodeURIComponent(m.id);
    const top = el('span', 'row-top');
    const from = el('span', 'from', displayName(m.sender) || '(no sender)');
    from.title = m.sender || '';
    const t = el('time', 'when');
    t.dateTime = m.received_at;
    t.dataset.rel = '';
    t.title = m.received_at.replace('T', ' ').slice(0, 19) + ' UTC';
    top.append(from, t);
    const bottom = el('span', 'row-bottom');
    // the subject is cut with an ellipsis; the attachment marker stays outside it, so it is never cut off
    const line = el('span', 'subject-line');
    line.append(el('span', 'subject', m.subject || '(no subject)'));
    if (m.has_attachments) {
      const clip = el('span', 'clip');
      clip.title = 'Has attachments';
      clip.append(icon(CLIP_PATH), el('span', 'clip-word', 'attachment'));
      line.append(clip);
    }
    const ttl = el('time', 'ttl');
    ttl.dateTime = m.expires_at;
    ttl.dataset.countdown = '';
    bottom.append(line, ttl);
    const extra = el('span', 'row-extra');
    extra.hidden = true;
    a.append(top, bottom, extra);
    const del = el('button', 'del');
    del.type = 'button';
    del.append(icon(TRASH_PATH), el('span', 'del-word', 'Delete'));
    del.setAttribute('aria-label', 'Delete email "' + (m.subject || '(no subject)') + '" from ' + (m.sender || 'unknown sender'));
    del.addEventListener('click', () => deleteOne(m.id, li));
    li.append(a, del);
    return li;
  }

  // Row previews (one-line preview, code badge, dropped attachments), fetched for new rows in
  // batches of up to 50; the views behind them are derived once per message on the server.
  const pending = new Set();
  let previewTimer = 0;
  function wantPreview(id) {
    pending.add(id);
    clearTimeout(previewTimer);
    previewTimer = setTimeout(loadPreviews, 50);
  }
  async function loadPreviews() {
    const ids = [...pending].slice(0, 50);
    if (ids.length === 0) return;
    for (const id of ids) pending.delete(id);
    try {
      for (const p of await previews(address, ids)) showPreview(p);
    } catch {
      // offline: rows keep their summary
    } finally {
      if (pending.size) previewTimer = setTimeout(loadPreviews, 50);
    }
  }
  function showPreview(p) {
    const li = rowOf(p.id);
    if (!li) return;
    const parts = [];
    if (p.code) {
      const badge = el('span', 'code-badge', p.code);
      badge.title = 'Verification code found in this email';
      parts.push(badge);
    }
    if (p.attachments_dropped > 0) {
      const dropped = el('span', 'dropped', p.attachments_dropped === 1 ? '1 attachment not kept' : p.attachments_dropped + ' attachments not kept');
      dropped.title = 'Over 5 MB, or past the 100th: cut out of the stored copy';
      parts.push(dropped);
    }
    if (p.preview) parts.push(el('span', 'preview', p.preview));
    const extra = li.querySelector('.row-extra');
    extra.replaceChildren(...parts);
    extra.hidden = parts.length === 0;
    li.dataset.search += ' ' + (p.code || '') + ' ' + (p.preview || '').toLowerCase();
    render();
  }

  // Search: narrows the list by sender, subject and preview as you type, then asks the server for
  // the rows whose body text matches (the API's text filter); "/" focuses it.
  let bodyHits = new Set();
  let bodyQuery = '';
  let bodyTimer = 0;
  function applySearch() {
    const q = search.value.trim().toLowerCase();
    let shown = 0;
    for (const li of list.children) {
      const hit = !q || (li.dataset.search || '').includes(q) || (bodyQuery === q && bodyHits.has(li.dataset.id));
      li.hidden = !hit;
      if (hit) shown++;
    }
    return shown;
  }
  async function searchBodies() {
    const q = search.value.trim().toLowerCase();
    if (!q) return;
    try {
      const ids = await searchIds(address, q);
      if (search.value.trim().toLowerCase() !== q) return;
      bodyHits = new Set(ids);
      bodyQuery = q;
      render();
    } catch {
      // offline: the local filter stands
    }
  }
  search.addEventListener('input', () => {
    render();
    clearTimeout(bodyTimer);
    bodyTimer = setTimeout(searchBodies, 250);
  });

  // Keyboard: j / k move between rows, Enter opens, Delete deletes, / searches.
  document.addEventListener('keydown', (ev) => {
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement || ev.metaKey || ev.ctrlKey || ev.altKey) return;
    const rows = [...list.children].filter((li) => !li.hidden);
    const current = rows.findIndex((li) => li.contains(document.activeElement));
    if (ev.key === '/') {
      ev.preventDefault();
      search.focus();
    } else if (ev.key === 'j' || ev.key === 'k') {
      if (rows.length === 0) return;
      const next = ev.key === 'j' ? Math.min(rows.length - 1, current + 1) : Math.max(0, current - 1);
      rows[current < 0 ? 0 : next].querySelector('a').focus();
      ev.preventDefault();
    } else if (ev.key === 'Delete' && current >= 0) {
      rows[current].querySelector('button.del').click();
      ev.preventDefault();
    }
  });

  function render() {
    const n = emails.size;
    const shown = applySearch();
    count.textContent = (n === 1 ? '1 email' : n + ' emails') + (shown < n ? ' (' + shown + ' shown)' : '');
    emptyState.hidden = n > 0;
    emptyButton.disabled = n === 0;
    clock.tick();
  }

  function add(items, fresh) {
    // items: oldest first; each goes on top, so the list stays newest first
    for (const m of items) {
      if (emails.has(m.id)) continue;
      emails.set(m.id, m);
      list.prepend(row(m, fresh));
      wantPreview(m.id);
      if (fresh && document.hidden) unseen++;
    }
    if (unseen > 0) document.title = '(' + unseen + ') ' + baseTitle;
    render();
  }
  function remove(id) {
    emails.delete(id);
    rowOf(id)?.remove();
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) {
      unseen = 0;
      document.title = baseTitle;
    }
  });

  async function deleteOne(id, li) {
    const error = await deleteEmail(id);
    if (error) return toast(error);
    const next = li.nextElementSibling || li.previousElementSibling;
    li.remove();
    emails.delete(id);
    render();
    toast('Email deleted');
    const focus = next && next.querySelector('a');
    (focus || list).focus?.();
  }

  let confirmTimer = 0;
  emptyButton.addEventListener('click', async () => {
    if (!emptyButton.dataset.confirm) {
      emptyButton.dataset.confirm = '1';
      emptyButton.textContent = 'Delete all ' + emails.size + '? Click again';
      confirmTimer = setTimeout(() => {
        delete emptyButton.dataset.confirm;
        emptyButton.textContent = 'Empty inbox';
      }, 5000);
      return;
    }
    clearTimeout(confirmTimer);
    delete emptyButton.dataset.confirm;
    emptyButton.textContent = 'Empty inbox';
    let out;
    try {
      out = await purgeInbox(address);
    } catch (err) {
      return toast(err.message);
    }
    emails.clear();
    list.replaceChildren();
    render();
    toast(out.deleted === 1 ? 'Deleted 1 email' : 'Deleted ' + out.deleted + ' emails');
  });

  $('#copy').addEventListener('click', async (ev) => {
    const text = ev.currentTarget.dataset.copy;
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const ta = el('textarea');
      ta.value = text;
      document.body.append(ta);
      ta.select();
      document.execCommand('copy');
      ta.remove();
    }
    toast('Address copied');
  });

  // Live: each (re)connection's list is the truth (mail deleted elsewhere drops out), then new mail streams in.
  const stop = follow(address, {
    onList({ emails: listed, serverMs }) {
      clock.sync(serverMs);
      const ids = new Set(listed.map((m) => m.id));
      for (const id of [...emails.keys()]) if (!ids.has(id)) remove(id);
      add(listed.slice().reverse(), false);
    },
    onMail(m) {
      add([m], true);
      toast('New email: ' + (m.subject || '(no subject)'));
    },
    onStatus(state) {
      const [on, text] = STATUS[state];
      $('#live').classList.toggle('on', on);
      $('#status-text').textContent = text;
    },
  });
  addEventListener('pagehide', stop);

  // Expired mail leaves the list when its countdown ends.
  setInterval(() => {
    const t = clock.now();
    for (const [id, m] of emails) if (Date.parse(m.expires_at) <= t) remove(id);
    render();
  }, 1000);
}
