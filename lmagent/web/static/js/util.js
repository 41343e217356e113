// Small helpers shared by the page's modules: DOM building, formatting, the API and Markdown.
// Text always goes into the page through textContent; HTML only through renderMarkdown.

export const $ = (id) => document.getElementById(id);

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function randomId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes); // crypto.randomUUID needs a secure context; a LAN page is not
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function pretty(value) {
  if (typeof value === 'string') {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch (e) { return value; }
  }
  try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
}

export function oneLine(value, limit = 160) {
  let text = typeof value === 'string' ? value : JSON.stringify(value);
  text = (text || '').replace(/\s+/g, ' ');
  return text.length > limit ? text.slice(0, limit - 1) + '…' : text;
}

export function shortArgs(args) {
  let value = args;
  if (typeof value === 'string') {
    try { value = JSON.parse(value); } catch (e) { return oneLine(value); }
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    return oneLine(Object.entries(value).map(([k, v]) => `${k}=${oneLine(v, 60)}`).join(' '));
  }
  return oneLine(value);
}

export function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, '0');
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

export function localTime(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  return isNaN(date) ? String(iso) : date.toLocaleString();
}

export function formatSize(bytes) {
  if (bytes === undefined) return '';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1048576) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

// JSON API call; a 401 means the sign-in ended, so the page goes back to the PIN form.
export async function api(method, url, body) {
  const options = { method, credentials: 'same-origin', headers: {} };
  if (body instanceof FormData) {
    options.body = body;
  } else if (body !== undefined) {
    options.headers['Content-Type'] = 'application/json';
    options.body = JSON.stringify(body);
  }
  const response = await fetch(url, options);
  if (response.status === 401) {
    window.location.replace('/');
    throw new Error('signed out');
  }
  const data = await response.json().catch(() => ({}));
  return { status: response.status, ok: response.ok, data };
}

// ------------------------------------------------------------------ Markdown

const PURIFY = {
  RETURN_DOM_FRAGMENT: true, // nodes, never an HTML string assigned to innerHTML
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
  FORBID_ATTR: ['style'],
};
const MARKER_LINE = /^[ \t]*[*_`]*TASK_COMPLETE[*_`.!]*[ \t]*$/gm; // shown as the ending instead
// a call written as text (TOOL_CALL_MODE=text) is shown as its tool row, not as markup
const CALL_MARKUP = /<tool_call>[\s\S]*?(<\/tool_call>|$)/g;

if (window.DOMPurify) {
  window.DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A') {
      node.setAttribute('target', '_blank');
      node.setAttribute('rel', 'noopener noreferrer');
    }
  });
}

export function renderMarkdown(target, text) {
  const source = text.replace(MARKER_LINE, '').replace(CALL_MARKUP, '');
  let fragment;
  if (window.marked && window.DOMPurify) {
    const html = window.marked.parse(source, { gfm: true, breaks: false, async: false });
    fragment = window.DOMPurify.sanitize(html, PURIFY);
  } else {
    fragment = el('div', 'plain', source); // never fall back to raw HTML
  }
  // a fence just opened (mid-stream, or where a reply stopped) is no code block yet
  for (const pre of fragment.querySelectorAll('pre')) if (!pre.textContent.trim()) pre.remove();
  target.replaceChildren(fragment);
}
