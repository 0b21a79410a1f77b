// Content-Disposition for downloads (RFC 6266 + RFC 5987): an ASCII fallback and `filename*` in UTF-8.
// The stored filename is already safe (safeFilename): no path parts, controls or bidi characters.

/** `attachment; filename="<ASCII fallback>"; filename*=UTF-8''<percent-encoded name>`. */
export function contentDisposition(filename: string): string {
  const dot = filename.lastIndexOf('.');
  const ext = dot > 0 && /^\.[A-Za-z0-9]{1,10}$/.test(filename.slice(dot)) ? filename.slice(dot) : '';
  let ascii = filename
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '') // accents go, letters stay: résumé → resume
    .replace(/[^\x20-\x7e]/g, '_')
    .replace(/["\\%;]/g, '_')
    .trim();
  // a name with no ASCII letter or digit left (only Japanese, say) falls back to "attachment.<ext>"
  if (!/[A-Za-z0-9]/.test(ascii.slice(0, ascii.length - ext.length))) ascii = `attachment${ext}`;
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
