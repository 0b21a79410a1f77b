// ephemail web pages: one small script for the home page, the inbox and the email view. Plain
// browser JavaScript served as is (no build step). Mail content is only ever put in the DOM as
// text (textContent), never as markup; the HTML body lives in a sandboxed frame of its own.
'use strict';

(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const page = document.body.dataset.page;
  let clockOffset = 0; // server time minus browser time, from the event stream's snapshot

  const toastEl = $('#toast');
  let toastTimer = 0;
  function toast(message) {
    if (!toastEl) return;
    toastEl.textContent = message;
    toastEl.classList.add('show');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => toastEl.classList.remove('show'), 2600);
  }

  function inboxPath(address) {
    return '/inbox/' + encodeURIComponent(address).replace(/%40/g, '@');
  }

  async function apiError(res) {
    try {
      const body = await res.json();
      if (body && body.error && body.error.message) return body.error.message;
    } catch {
      // not JSON
    }
    return 'Request failed (' + res.status + ')';
  }

  // ---- time ---------------------------------------------------------------------------------
  const now = () => Date.now() + clockOffset;

  function relative(ms) {
    const s = Math.max(0, Math.round((now() - ms) / 1000));
    if (s < 10) return 'just now';
    if (s < 60) return s + ' s ago';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ago';
    const h = Math.floor(m / 60);
    if (h < 48) return h + ' h ago';
    return Math.floor(h / 24) + ' d ago';
  }

  function countdown(ms) {
    const s = Math.max(0, Math.floor((ms - now()) / 1000));
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const sec = String(s % 60).padStart(2, '0');
    if (s === 0) return 'deleting now';
    return 'deleted in ' + (h > 0 ? h + ':' + String(m).padStart(2, '0') : String(m)) + ':' + sec;
  }

  function tickTimes() {
    for (const el of document.querySelectorAll('time[data-rel]')) el.textContent = relative(Date.parse(el.dateTime));
    for (const el of document.querySelectorAll('time[data-countdown]')) el.textContent = countdown(Date.parse(el.dateTime));
  }

  // ---- home ---------------------------------------------------------------------------------
  function home() {
    const button = $('#create');
    const error = $('#create-error');
    button.addEventListener('click', async () => {
      button.disabled = true;
      error.hidden = true;
      try {
        const res = await fetch('/web/inboxes', { method: 'POST' });
        if (!res.ok) throw new Error(await apiError(res));
        const data = await res.json();
        location.assign(inboxPath(data.address));
      } catch (err) {
        error.textContent = err instanceof Error ? err.message : String(err);
        error.hidden = false;
        button.disabled = false;
      }
    });
  }

  // ---- inbox --------------------------------------------------------------------------------
  function inbox() {
    const address = document.body.dataset.address;
    const list = $('#emails');
    const emptyState = $('#empty-state');
    const count = $('#count');
    const emptyButton = $('#empty');
    const statusText = $('#status-text');
    const live = $('#live');
    const emails = new Map(); // id -> summary
    const baseTitle = document.title;
    let unseen = 0;

    function el(tag, cls, text) {
      const e = document.createElement(tag);
      if (cls) e.className = cls;
      if (text !== undefined) e.textContent = text;
      return e;
    }

    // Read state stays in this browser (localStorage), per email id; ids expire with their mail.
    const readKey = 'ephemail:read';
    const readIds = new Set((() => {
      try {
        return JSON.parse(localStorage.getItem(readKey) || '[]');
      } catch {
        return [];
      }
    })());

    /** "Alice Example" <alice@x> → Alice Example (the full header on hover). */
    function displayName(sender) {
      const m = /^\s*"?([^"<]*?)"?\s*<([^<>]*)>\s*$/.exec(sender || '');
      if (m) return m[1].trim() || m[2].trim();
      return (sender || '').trim();
    }

    function row(m, fresh) {
      const li = el('li', 'row' + (fresh ? ' new' : '') + (readIds.has(m.id) ? '' : ' unread'));
      li.dataset.id = m.id;
      li.dataset.search = ((m.sender || '') + ' ' + (m.subject || '')).toLowerCase();
      const a = el('a', 'row-link');
      a.href = inboxPath(address) + '/' + encodeURIComponent(m.id);
      const top = el('span', 'row-top');
      const from = el('span', 'from', displayName(m.sender) || '(no sender)');
      from.title = m.sender || '';
      top.append(from);
      const t = el('time', 'when');
      t.dateTime = m.received_at;
      t.dataset.rel = '';
      t.title = m.received_at.replace('T', ' ').slice(0, 19) + ' UTC';
      top.append(t);
      const bottom = el('span', 'row-bottom');
      const subject = el('span', 'subject', m.subject || '(no subject)');
      if (m.has_attachments) subject.append(el('span', 'clip', ' · attachment'));
      bottom.append(subject);
      const extra = el('span', 'row-extra');
      extra.hidden = true;
      const ttl = el('time', 'ttl');
      ttl.dateTime = m.expires_at;
      ttl.dataset.countdown = '';
      bottom.append(ttl);
      a.append(top, bottom, extra);
      const del = el('button', 'del', 'Delete');
      del.type = 'button';
      del.setAttribute('aria-label', 'Delete email "' + (m.subject || '(no subject)') + '" from ' + (m.sender || 'unknown sender'));
      del.addEventListener('click', () => deleteOne(m.id, li));
      li.append(a, del);
      return li;
    }

    // Row details (one-line preview, code badge, dropped attachments), fetched for new rows in
    // batches; the views behind them are derived once per message on the server.
    const pending = new Set();
    let detailsTimer = 0;
    function wantDetails(id) {
      pending.add(id);
      clearTimeout(detailsTimer);
      detailsTimer = setTimeout(loadDetails, 50);
    }
    async function loadDetails() {
      const ids = [...pending].slice(0, 50);
      if (ids.length === 0) return;
      for (const id of ids) pending.delete(id);
      try {
        const res = await fetch('/web/inboxes/' + encodeURIComponent(address) + '/details?ids=' + ids.map(encodeURIComponent).join(','));
        if (!res.ok) return;
        const { details } = await res.json();
        for (const [id, d] of Object.entries(details)) showDetails(id, d);
      } catch {
        // offline: rows keep their summary
      } finally {
        if (pending.size) detailsTimer = setTimeout(loadDetails, 50);
      }
    }
    function showDetails(id, d) {
      const li = list.querySelector('li[data-id="' + CSS.escape(id) + '"]');
      if (!li) return;
      const extra = li.querySelector('.row-extra');
      const parts = [];
      if (d.code) {
        const badge = el('span', 'code-badge', d.code);
        badge.title = 'Verification code found in this email';
        parts.push(badge);
      }
      if (d.attachments_dropped > 0) {
        const dropped = el('span', 'dropped', d.attachments_dropped === 1 ? '1 attachment not kept' : d.attachments_dropped + ' attachments not kept');
        dropped.title = 'Over 5 MB, or past the 100th: cut out of the stored copy';
        parts.push(dropped);
      }
      if (d.preview) parts.push(el('span', 'preview', d.preview));
      extra.replaceChildren(...parts);
      extra.hidden = parts.length === 0;
      li.dataset.search += ' ' + (d.code || '') + ' ' + (d.preview || '').toLowerCase();
      render();
    }

    // Search: narrows the list by sender, subject and preview as you type, then asks the server
    // for the rows whose body text matches (the API's text filter); "/" focuses it.
    const search = $('#search');
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
        const res = await fetch('/web/inboxes/' + encodeURIComponent(address) + '/search?q=' + encodeURIComponent(q));
        if (!res.ok || search.value.trim().toLowerCase() !== q) return;
        bodyHits = new Set((await res.json()).ids);
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
      tickTimes();
    }

    function add(items, fresh) {
      // items: oldest first; each goes on top, so the list stays newest first
      for (const m of items) {
        if (emails.has(m.id)) continue;
        emails.set(m.id, m);
        list.prepend(row(m, fresh));
        wantDetails(m.id);
        if (fresh && document.hidden) unseen++;
      }
      if (unseen > 0) document.title = '(' + unseen + ') ' + baseTitle;
      render();
    }

    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) {
        unseen = 0;
        document.title = baseTitle;
      }
    });

    async function deleteOne(id, li) {
      const res = await fetch('/web/emails/' + encodeURIComponent(id), { method: 'DELETE' });
      if (!res.ok && res.status !== 404) return toast(await apiError(res));
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
      const res = await fetch('/web/inboxes/' + encodeURIComponent(address) + '/emails', { method: 'DELETE' });
      if (!res.ok) return toast(await apiError(res));
      const data = await res.json();
      emails.clear();
      list.replaceChildren();
      render();
      toast(data.deleted === 1 ? 'Deleted 1 email' : 'Deleted ' + data.deleted + ' emails');
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

    // Live feed: the server pushes a snapshot on each (re)connect, then every new email.
    let source = null;
    let retry = 0;
    function setStatus(ok, text) {
      live.classList.toggle('on', ok);
      statusText.textContent = text;
    }
    // Without the live stream (refused: too many pages open from this network, or failing), the
    // list still shows: read once from the API, again on each retry.
    let live_ = false;
    async function fallbackList() {
      if (live_) return;
      try {
        const res = await fetch('/web/inboxes/' + encodeURIComponent(address) + '/emails');
        if (!res.ok || live_) return;
        const items = (await res.json()).emails;
        add(items.slice().reverse(), false);
        setStatus(false, 'Not live right now (too many open pages from your network?): the list is refreshed every few seconds');
      } catch {
        // offline: the next retry tries again
      }
    }
    function connect() {
      source = new EventSource('/web/events/' + encodeURIComponent(address));
      source.addEventListener('open', () => {
        live_ = true;
      });
      source.addEventListener('snapshot', (ev) => {
        const snap = JSON.parse(ev.data);
        clockOffset = Date.parse(snap.now) - Date.now();
        const ids = new Set(snap.emails.map((m) => m.id));
        for (const id of [...emails.keys()]) {
          if (!ids.has(id)) {
            emails.delete(id);
            list.querySelector('li[data-id="' + CSS.escape(id) + '"]')?.remove();
          }
        }
        add(snap.emails.slice().reverse(), false);
        retry = 0;
        setStatus(true, 'Live: new mail appears here by itself');
      });
      source.addEventListener('mail', (ev) => {
        const items = JSON.parse(ev.data).emails;
        add(items, true);
        toast(items.length === 1 ? 'New email: ' + (items[0].subject || '(no subject)') : items.length + ' new emails');
      });
      source.addEventListener('error', () => {
        setStatus(false, 'Reconnecting…');
        if (source.readyState === EventSource.CLOSED) {
          // refused (429) or failed: try again with backoff; EventSource only retries on its own after a clean close
          source.close();
          live_ = false;
          void fallbackList();
          retry = Math.min(retry + 1, 6);
          setTimeout(connect, 1000 * 2 ** retry);
        }
      });
    }
    connect();
    addEventListener('pagehide', () => source && source.close());

    // Expired mail leaves the list when its countdown ends.
    setInterval(() => {
      const t = now();
      for (const [id, m] of emails) {
        if (Date.parse(m.expires_at) <= t) {
          emails.delete(id);
          list.querySelector('li[data-id="' + CSS.escape(id) + '"]')?.remove();
        }
      }
      render();
    }, 1000);
  }

  // ---- email view ---------------------------------------------------------------------------
  function email() {
    const id = document.body.dataset.id;
    try {
      const read = JSON.parse(localStorage.getItem('ephemail:read') || '[]').slice(-500);
      if (!read.includes(id)) read.push(id);
      localStorage.setItem('ephemail:read', JSON.stringify(read));
    } catch {
      // storage off: nothing is remembered
    }
    const inboxHref = document.body.dataset.inbox;

    // Tabs: buttons with role=tab; arrow keys move between them (WAI-ARIA tabs pattern).
    const tabs = [...document.querySelectorAll('[role=tab]')];
    function select(tab) {
      for (const t of tabs) {
        const on = t === tab;
        t.setAttribute('aria-selected', String(on));
        t.tabIndex = on ? 0 : -1;
        document.getElementById(t.getAttribute('aria-controls')).hidden = !on;
      }
      if (tab.id === 'tab-source') loadSource();
    }
    // The source, fetched once when its tab is first opened: the received bytes, shown as text
    // (as Latin-1 when they are not UTF-8), the first 2 MB of them.
    let sourceLoaded = false;
    async function loadSource() {
      if (sourceLoaded) return;
      sourceLoaded = true;
      const pre = $('#source-body');
      const res = await fetch('/web/emails/' + encodeURIComponent(id) + '/raw');
      if (!res.ok) {
        sourceLoaded = false;
        pre.textContent = await apiError(res);
        return;
      }
      const bytes = new Uint8Array(await res.arrayBuffer());
      const max = 2 * 1024 * 1024;
      const shown = bytes.subarray(0, max);
      let text;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(shown);
      } catch {
        text = new TextDecoder('latin1').decode(shown);
      }
      pre.textContent = text + (bytes.length > max ? '\n[… ' + (bytes.length - max) + ' more bytes: download the .eml to see them]' : '');
    }
    tabs.forEach((tab, i) => {
      tab.addEventListener('click', () => select(tab));
      tab.addEventListener('keydown', (ev) => {
        const d = ev.key === 'ArrowRight' ? 1 : ev.key === 'ArrowLeft' ? -1 : 0;
        if (!d) return;
        const next = tabs[(i + d + tabs.length) % tabs.length];
        select(next);
        next.focus();
      });
    });

    for (const b of document.querySelectorAll('.copy-code')) {
      b.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(b.dataset.code);
          toast('Code copied');
        } catch {
          toast('Copy failed: select the code and copy it');
        }
      });
    }

    const rawToggle = $('#headers-raw');
    if (rawToggle) {
      rawToggle.addEventListener('click', () => {
        const raw = rawToggle.getAttribute('aria-pressed') !== 'true';
        rawToggle.setAttribute('aria-pressed', String(raw));
        rawToggle.textContent = raw ? 'Show decoded values' : 'Show raw values';
        for (const e of document.querySelectorAll('.hv-raw')) e.hidden = !raw;
        for (const e of document.querySelectorAll('.hv-decoded')) e.hidden = raw;
      });
    }

    // The frame fits its content: as tall as the mail (no second scrollbar, no blank box), and a
    // mail wider than the frame (a 600 px newsletter on a phone) is scaled down to fit, with a
    // "Zoom 100%" toggle. The page reads the frame's document (same origin, allow-same-origin); the
    // frame itself runs no script. Preview widths (phone, tablet, full) narrow the frame on wide screens.
    const frame = $('#body-frame');
    if (frame) {
      const zoomBtn = $('#zoom-toggle');
      let actualSize = false;
      let observed = null;
      const fit = () => {
        let doc;
        try {
          doc = frame.contentDocument;
        } catch {
          return;
        }
        if (!doc || !doc.documentElement || !doc.body) return;
        const root = doc.documentElement;
        root.style.overflowY = 'hidden';
        root.style.zoom = '';
        const avail = frame.clientWidth;
        const natural = Math.max(root.scrollWidth, doc.body.scrollWidth);
        const wide = natural > avail + 1;
        zoomBtn.hidden = !wide;
        const scale = wide && !actualSize ? avail / natural : 1;
        if (scale < 1) root.style.zoom = String(scale);
        root.style.overflowX = wide && actualSize ? 'auto' : 'hidden';
        const height = Math.ceil(root.getBoundingClientRect().height * (scale < 1 ? scale : 1));
        const scrollbar = wide && actualSize ? 20 : 0;
        frame.style.height = Math.max(height, Math.ceil(doc.body.scrollHeight * (scale < 1 ? scale : 1))) + scrollbar + 2 + 'px';
        if (observed !== doc.body && typeof ResizeObserver === 'function') {
          observed = doc.body;
          new ResizeObserver(() => requestAnimationFrame(fit)).observe(doc.body);
          doc.addEventListener('load', () => requestAnimationFrame(fit), true); // images arriving
        }
      };
      frame.addEventListener('load', fit);
      if (frame.contentDocument?.readyState === 'complete') fit();
      window.addEventListener('resize', () => requestAnimationFrame(fit));
      zoomBtn.addEventListener('click', () => {
        actualSize = !actualSize;
        zoomBtn.setAttribute('aria-pressed', String(actualSize));
        zoomBtn.textContent = actualSize ? 'Fit to width' : 'Zoom 100%';
        fit();
      });
      for (const b of document.querySelectorAll('.preview-widths button')) {
        b.addEventListener('click', () => {
          for (const o of document.querySelectorAll('.preview-widths button')) o.setAttribute('aria-pressed', String(o === b));
          frame.style.width = b.dataset.width ? b.dataset.width + 'px' : '';
          frame.style.maxWidth = '100%';
          requestAnimationFrame(fit);
        });
      }
    }

    const load = $('#load-images');
    if (load) {
      load.addEventListener('click', () => {
        $('#body-frame').src = '/web/frames/' + encodeURIComponent(id) + '?images=1';
        load.disabled = true;
        load.textContent = 'Remote images loaded';
      });
    }

    $('#delete-email').addEventListener('click', async () => {
      const res = await fetch('/web/emails/' + encodeURIComponent(id), { method: 'DELETE' });
      if (!res.ok && res.status !== 404) return toast(await apiError(res));
      location.assign(inboxHref);
    });

    // Plain text: http(s) addresses become links; everything stays text.
    const pre = $('pre[data-linkify]');
    if (pre) {
      const text = pre.textContent;
      const re = /\bhttps?:\/\/[^\s<>"']+[^\s<>"'.,;:!?)\]]/g;
      const out = [];
      let last = 0;
      for (const m of text.matchAll(re)) {
        out.push(document.createTextNode(text.slice(last, m.index)));
        const a = document.createElement('a');
        a.href = m[0];
        a.textContent = m[0];
        a.rel = 'noopener noreferrer nofollow';
        a.target = '_blank';
        out.push(a);
        last = m.index + m[0].length;
      }
      if (out.length) {
        out.push(document.createTextNode(text.slice(last)));
        pre.replaceChildren(...out);
      }
    }

    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && !ev.target.closest('input,textarea')) location.assign(inboxHref);
    });
  }

  if (page === 'home') home();
  else if (page === 'inbox') inbox();
  else if (page === 'email') email();
  tickTimes();
  setInterval(tickTimes, 1000);
})();
