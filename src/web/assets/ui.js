// What every page shares: a query helper, element building, the toast, inbox paths, and the clock
// that renders relative times and countdowns (server time, from the API's Date header).
export const $ = (sel, root = document) => root.querySelector(sel);

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function inboxPath(address) {
  return '/inbox/' + encodeURIComponent(address).replace(/%40/g, '@');
}

/** A status line that shows a message for a moment. */
export function createToast(node) {
  let timer = 0;
  return (message) => {
    if (!node) return;
    node.textContent = message;
    node.classList.add('show');
    clearTimeout(timer);
    timer = setTimeout(() => node.classList.remove('show'), 2600);
  };
}

/** Relative times (`time[data-rel]`) and countdowns (`time[data-countdown]`), by the server's clock once known. */
export function createClock() {
  let offset = 0; // server time minus browser time
  const now = () => Date.now() + offset;
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
  return {
    now,
    /** `serverMs`: the server's time when the response was sent (to the second: its Date header). */
    sync(serverMs) {
      if (Number.isFinite(serverMs)) offset = serverMs + 500 - Date.now();
    },
    tick() {
      for (const e of document.querySelectorAll('time[data-rel]')) e.textContent = relative(Date.parse(e.dateTime));
      for (const e of document.querySelectorAll('time[data-countdown]')) e.textContent = countdown(Date.parse(e.dateTime));
    },
  };
}
