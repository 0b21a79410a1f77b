/** Text as HTML: the five characters that could end a text node or an attribute value, as entities. */
export const escapeHtml = (s: unknown): string => String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
