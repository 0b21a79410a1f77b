// The email page: remembered as read, tabs (the source loaded on first open), copy buttons for
// codes, raw header values, the isolated frame fitted to its mail, delete, and linkified text.
import { deleteEmail, rawEmail } from './api.js';
import { setupTabs } from './tabs.js';
import { $ } from './ui.js';

const SOURCE_MAX = 2 * 1024 * 1024;

function rememberRead(id) {
  try {
    const read = JSON.parse(localStorage.getItem('ephemail:read') || '[]').slice(-500);
    if (!read.includes(id)) read.push(id);
    localStorage.setItem('ephemail:read', JSON.stringify(read));
  } catch {
    // storage off: nothing is remembered
  }
}

/** The source tab: the received bytes as text (Latin-1 when not UTF-8), the first 2 MB of them, fetched once. */
function sourceLoader(id) {
  let loaded = false;
  return async () => {
    if (loaded) return;
    loaded = true;
    const pre = $('#source-body');
    const { bytes, error } = await rawEmail(id);
    if (error) {
      loaded = false;
      pre.textContent = error;
      return;
    }
    const shown = bytes.subarray(0, SOURCE_MAX);
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(shown);
    } catch {
      text = new TextDecoder('latin1').decode(shown);
    }
    pre.textContent = text + (bytes.length > SOURCE_MAX ? '\n[… ' + (bytes.length - SOURCE_MAX) + ' more bytes: download the .eml to see them]' : '');
  };
}

/**
 * The frame fits its content: as tall as the mail (no second scrollbar, no blank box), and a mail
 * wider than the frame (a 600 px newsletter on a phone) is scaled down to fit, with a "Zoom 100%"
 * toggle. The page reads the frame's document (same origin, allow-same-origin); the frame itself
 * runs no script. Preview widths (phone, tablet, full) narrow the frame on wide screens.
 */
function fitFrame(frame) {
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
    // a mail wider than its body overflows past the body's right padding: count that padding too, so
    // the scaled mail keeps the same margin on the right as on the left instead of touching the edge
    const bodyStyle = doc.defaultView ? doc.defaultView.getComputedStyle(doc.body) : null;
    const padRight = bodyStyle ? parseFloat(bodyStyle.paddingRight) || 0 : 0;
    const overflowing = doc.body.scrollWidth > doc.body.clientWidth + 1;
    const natural = Math.max(root.scrollWidth, doc.body.scrollWidth + (overflowing ? padRight : 0));
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

/** Plain text: http(s) addresses become links; everything stays text. */
function linkify(pre) {
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

/** On a phone the details under From (recipients, authentication, times) start collapsed: the body comes first. */
const PHONE = '(max-width: 40rem)';

export function emailView({ toast }) {
  const id = document.body.dataset.id;
  const inboxHref = document.body.dataset.inbox;
  rememberRead(id);
  const more = $('#meta-more');
  if (more && matchMedia(PHONE).matches) more.open = false;
  // a thumbnail that does not decode (a mislabelled attachment) is removed, not shown broken
  for (const img of document.querySelectorAll('img.thumb')) {
    const drop = () => {
      img.closest('li')?.classList.remove('has-thumb');
      img.remove();
    };
    if (img.complete && img.naturalWidth === 0 && img.currentSrc) drop();
    else img.addEventListener('error', drop);
  }
  const loadSource = sourceLoader(id);
  setupTabs((tab) => tab.id === 'tab-source' && loadSource());

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
  rawToggle?.addEventListener('click', () => {
    const raw = rawToggle.getAttribute('aria-pressed') !== 'true';
    rawToggle.setAttribute('aria-pressed', String(raw));
    rawToggle.textContent = raw ? 'Show decoded values' : 'Show raw values';
    for (const e of document.querySelectorAll('.hv-raw')) e.hidden = !raw;
    for (const e of document.querySelectorAll('.hv-decoded')) e.hidden = raw;
  });

  const frame = $('#body-frame');
  if (frame) fitFrame(frame);

  const load = $('#load-images');
  load?.addEventListener('click', () => {
    frame.src = '/web/frames/' + encodeURIComponent(id) + '?images=1';
    load.disabled = true;
    load.textContent = 'Remote images loaded';
  });

  $('#delete-email').addEventListener('click', async () => {
    const error = await deleteEmail(id);
    if (error) return toast(error);
    location.assign(inboxHref);
  });

  const pre = $('pre[data-linkify]');
  if (pre) linkify(pre);

  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && !ev.target.closest('input,textarea')) location.assign(inboxHref);
  });
}
