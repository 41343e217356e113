// What makes the page usable day to day: the server bar (model, server state, workspace,
// sandbox, rechecked), the guidance when the server is down, the welcome with example tasks,
// session search / rename / delete, highlighted code blocks with a copy button, and "sign out
// everywhere". It watches the DOM the other modules build instead of reaching into them.

import { $, api, el } from './util.js';

const RECHECK_MS = 3000; // with the server's 2 s probe interval: a stopped server shows in 5 s
const STATES = {
  reachable: 'server ready',
  loading: 'server: no model loaded',
  unreachable: 'server unreachable',
};

// ------------------------------------------------------------------ the server bar

export async function checkServer() {
  let info;
  try {
    const answer = await api('GET', '/api/server');
    if (!answer.ok) return;
    info = answer.data;
  } catch (e) {
    info = { state: 'unreachable', message: 'The web server itself cannot be reached.' };
  }
  const pill = $('server-state');
  pill.textContent = STATES[info.state] || info.state;
  pill.className = `pill server-${info.state}`;
  pill.title = info.url || '';
  if (info.model !== undefined) {
    const unknown = info.state === 'unreachable' ? 'unknown' : '(the loaded model)';
    $('server-model').textContent = info.model || unknown;
    $('server-model').title = info.model || '';
  }
  if (info.workspace) $('server-workspace').textContent = info.workspace;
  if (info.workspace) $('server-workspace').title = info.workspace; // shown cut short
  if (info.sandbox) $('server-sandbox').textContent = info.sandbox;
  if (info.sandbox) $('server-sandbox').title = info.sandbox;
  const down = $('server-down');
  down.textContent = info.message || '';
  down.className = `notice server-${info.state}`;
  down.hidden = !info.message;
}

function recheckWhileShown() {
  setInterval(() => { if (document.visibilityState === 'visible') checkServer(); }, RECHECK_MS);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') checkServer();
  });
}

// ------------------------------------------------------------------ the welcome

function wireWelcome() {
  const log = $('log');
  const welcome = $('welcome');
  const update = () => { welcome.hidden = log.childElementCount > 0; };
  new MutationObserver(update).observe(log, { childList: true });
  update();
  for (const button of welcome.querySelectorAll('button.example')) {
    button.addEventListener('click', () => {
      const input = $('input');
      input.value = button.textContent;
      input.dispatchEvent(new Event('input'));
      input.focus();
    });
  }
}

// ------------------------------------------------------------------ sessions

function sessionText(item) {
  return item.textContent.toLowerCase();
}

function filterSessions() {
  const words = $('session-search').value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const item of $('session-list').children) {
    const button = item.querySelector('.session-item');
    if (!button) continue;
    item.hidden = !words.every((word) => sessionText(item).includes(word));
    if (!item.hidden) shown += 1;
  }
  $('session-none').hidden = !words.length || shown > 0;
}

// Icons drawn by the page itself (an emoji is an empty box without an emoji font).
const ICONS = {
  rename: ['M4 20h4L19 9l-4-4L4 16z', 'M13 7l4 4'],
  delete: ['M4 7h16', 'M9 7V4h6v3', 'M6 7l1 13h10l1-13', 'M10 11v6', 'M14 11v6'],
};

function icon(name) {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('class', `icon-svg icon-${name}`);
  for (const d of ICONS[name]) {
    const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
    path.setAttribute('d', d);
    svg.append(path);
  }
  return svg;
}

function iconButton(name, label, action) {
  const button = el('button', 'icon small');
  button.type = 'button';
  button.title = name === 'delete' ? 'Delete' : 'Rename';
  button.setAttribute('aria-label', label);
  button.append(icon(name));
  button.addEventListener('click', action);
  return button;
}

function refreshList() {
  $('refresh-sessions').click();
}

async function renameSession(id, current) {
  const title = window.prompt('New name for this session', current);
  if (title === null || !title.trim()) return;
  const { ok, data } = await api('PATCH', `/api/sessions/${encodeURIComponent(id)}`, { title });
  if (!ok) showProblem(data.error || 'cannot rename it');
  refreshList();
}

async function deleteSession(id, name) {
  if (!window.confirm(`Delete the session "${name}"? Its conversation cannot be restored.`)) return;
  const { ok, data } = await api('DELETE', `/api/sessions/${encodeURIComponent(id)}`);
  if (!ok) {
    showProblem(data.error || 'cannot delete it');
    return;
  }
  if (document.querySelector('.session-item.current')?.dataset.id === id) $('new-chat').click();
  refreshList();
}

function showProblem(text) {
  const notice = $('notice');
  notice.textContent = text;
  notice.hidden = false;
}

// Each listed session gets rename and delete buttons (no delete while it runs).
function decorateSessions() {
  for (const item of $('session-list').children) {
    const button = item.querySelector('.session-item');
    if (!button || item.querySelector('.session-actions')) continue;
    const id = button.dataset.id;
    const name = button.querySelector('.task')?.textContent || id;
    const actions = el('span', 'session-actions');
    actions.append(iconButton('rename', `Rename ${name}`, () => renameSession(id, name)));
    if (!button.querySelector('.status-running')) {
      actions.append(iconButton('delete', `Delete ${name}`, () => deleteSession(id, name)));
    }
    item.classList.add('with-actions');
    item.append(actions);
  }
  filterSessions();
}

function wireSessions() {
  $('session-search').addEventListener('input', filterSessions);
  new MutationObserver(decorateSessions).observe($('session-list'), { childList: true });
}

// ------------------------------------------------------------------ code blocks

const PURIFY_CODE = { RETURN_DOM_FRAGMENT: true, ALLOWED_TAGS: ['span'], ALLOWED_ATTR: ['class'] };

function highlight(code) {
  const hljs = window.hljs;
  if (!hljs || !window.DOMPurify) return;
  const match = /language-([\w+#.-]+)/.exec(code.className);
  const language = match && hljs.getLanguage(match[1]) ? match[1] : null;
  const result = language
    ? hljs.highlight(code.textContent, { language, ignoreIllegals: true })
    : hljs.highlightAuto(code.textContent);
  code.replaceChildren(window.DOMPurify.sanitize(result.value, PURIFY_CODE));
  code.classList.add('hljs');
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = el('textarea'); // a LAN page is no secure context: the older way
  area.value = text;
  area.setAttribute('readonly', '');
  area.className = 'sr-only';
  document.body.append(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

function copyButton(code) {
  const button = el('button', 'copy-code small', 'Copy');
  button.type = 'button';
  button.setAttribute('aria-label', 'Copy code');
  button.addEventListener('click', async () => {
    try {
      await copyText(code.textContent);
      button.textContent = 'Copied';
    } catch (e) {
      button.textContent = 'Copy failed';
    }
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
  });
  return button;
}

function decorateCode(root) {
  for (const code of root.querySelectorAll('.md pre > code:not([data-done])')) {
    code.dataset.done = '1';
    highlight(code);
    const pre = code.parentElement;
    pre.classList.add('code-block');
    pre.append(copyButton(code));
  }
}

function wireCode() {
  for (const root of [$('log'), $('preview-body')]) {
    new MutationObserver(() => decorateCode(root)).observe(root, { childList: true, subtree: true });
  }
}

// ------------------------------------------------------------------ sign out everywhere

function wireSignOutEverywhere() {
  $('logout-all').addEventListener('click', async () => {
    if (!window.confirm('Sign out every device (phones, other browsers) that uses this PIN?')) return;
    await api('POST', '/api/logout', { everywhere: true }).catch(() => null);
    window.location.replace('/');
  });
}

export function startEveryday() {
  wireWelcome();
  wireSessions();
  wireCode();
  wireSignOutEverywhere();
  checkServer();
  recheckWhileShown();
}
