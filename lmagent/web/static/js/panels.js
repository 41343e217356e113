// The side panel (sessions, file tree), the file preview, image attachments and input history.

import { $, api, el, formatSize, localTime, oneLine, renderMarkdown } from './util.js';

const PHONE = window.matchMedia('(max-width: 800px)');

// ------------------------------------------------------------------ side panel

export function openSide(tab) {
  $('side').classList.remove('collapsed');
  $('toggle-side').setAttribute('aria-expanded', 'true');
  if (tab) selectTab(tab);
}

export function closeSide(always = false) {
  if (always || PHONE.matches) {
    $('side').classList.add('collapsed');
    $('toggle-side').setAttribute('aria-expanded', 'false');
  }
}

export function toggleSide() {
  if ($('side').classList.contains('collapsed')) openSide();
  else closeSide(true);
}

export function selectTab(tab) {
  const sessions = tab === 'sessions';
  $('tab-sessions').classList.toggle('active', sessions);
  $('tab-files').classList.toggle('active', !sessions);
  $('tab-sessions').setAttribute('aria-selected', String(sessions));
  $('tab-files').setAttribute('aria-selected', String(!sessions));
  $('sessions-panel').hidden = !sessions;
  $('files-panel').hidden = sessions;
  if (!sessions && !$('file-tree').childElementCount) refreshFiles();
}

export function startCollapsedOnPhones() {
  if (PHONE.matches) closeSide();
}

// ------------------------------------------------------------------ sessions

// `current()` names the session shown (marked in the list); `open(id)` shows one.
export async function refreshSessions(current, open) {
  const { ok, data } = await api('GET', '/api/sessions');
  if (!ok) return;
  const list = $('session-list');
  list.replaceChildren();
  for (const meta of data.sessions || []) {
    const button = el('button', 'session-item');
    button.type = 'button';
    button.dataset.id = meta.id;
    if (meta.id === current()) button.classList.add('current');
    button.append(el('span', 'task', oneLine(meta.title || meta.task || '(no task)', 120)));
    const info = el('span', 'meta');
    info.append(el('span', `status-badge status-${meta.status}`, meta.status || '?'));
    info.append(el('span', null, localTime(meta.updated || meta.created)));
    if (meta.source && meta.source !== 'web') info.append(el('span', null, meta.source));
    button.append(info);
    button.title = meta.id;
    button.addEventListener('click', () => open(meta.id));
    const item = el('li');
    item.append(button);
    list.append(item);
  }
  if (!list.childElementCount) list.append(el('li', 'muted', 'no sessions yet'));
}

export function markCurrentSession(id) {
  for (const item of document.querySelectorAll('.session-item')) {
    item.classList.toggle('current', item.dataset.id === id);
  }
}

// ------------------------------------------------------------------ files

async function listDirectory(path, container) {
  const { ok, data } = await api('GET', `/api/files?path=${encodeURIComponent(path)}`);
  container.replaceChildren();
  if (!ok) {
    container.append(el('div', 'muted', data.error || 'cannot list'));
    return;
  }
  for (const entry of data.entries) {
    if (entry.type === 'dir') {
      const details = el('details');
      const children = el('div', 'children');
      details.append(el('summary', 'file-name', entry.name), children);
      details.addEventListener('toggle', () => {
        if (details.open && !children.dataset.loaded) {
          children.dataset.loaded = '1';
          listDirectory(entry.path, children);
        }
      });
      container.append(details);
    } else {
      const button = el('button', `file-entry ${entry.type === 'file' ? '' : 'outside'}`);
      button.type = 'button';
      button.append(el('span', 'file-name', entry.name));
      button.append(el('span', 'size', entry.type === 'file' ? formatSize(entry.size) : 'outside'));
      if (entry.type === 'file') button.addEventListener('click', () => preview(entry.path));
      else button.disabled = true;
      container.append(button);
    }
  }
  if (data.truncated) container.append(el('div', 'muted', '… more entries not shown'));
  if (!data.entries.length) container.append(el('div', 'muted', '(empty)'));
}

export function refreshFiles() {
  listDirectory('.', $('file-tree'));
}

export async function preview(path) {
  const { ok, data } = await api('GET', `/api/file?path=${encodeURIComponent(path)}`);
  const body = $('preview-body');
  body.replaceChildren();
  $('preview-title').textContent = path;
  $('preview').hidden = false;
  if (!ok) {
    body.append(el('div', 'error-line', data.error || 'cannot open'));
    return;
  }
  const raw = `/api/file?raw=1&path=${encodeURIComponent(data.path)}`;
  $('preview-download').href = `${raw}&download=1`;
  if (data.kind === 'image') {
    const img = el('img');
    img.alt = data.name;
    img.src = raw;
    body.append(img);
  } else if (data.kind === 'html') {
    const frame = el('iframe');
    frame.setAttribute('sandbox', ''); // opaque origin, no script, no access to this page
    frame.setAttribute('referrerpolicy', 'no-referrer');
    frame.title = `preview of ${data.name}`;
    frame.src = raw;
    const source = el('details');
    source.append(el('summary', 'muted', 'source'), el('pre', null, data.content));
    body.append(frame, source);
  } else if (data.kind === 'binary') {
    body.append(el('div', 'muted', `binary file, ${formatSize(data.size)}`));
  } else if (/\.(md|markdown)$/i.test(data.name)) {
    const rendered = el('div', 'md');
    renderMarkdown(rendered, data.content); // sanitised, as the chat's Markdown
    const source = el('details');
    source.append(el('summary', 'muted', 'source'), el('pre', null, data.content));
    body.append(rendered, source);
  } else {
    body.append(el('pre', null, data.content));
    if (data.truncated) body.append(el('div', 'muted', `… first part of ${formatSize(data.size)}`));
  }
}

export function closePreview() {
  $('preview').hidden = true;
  $('preview-body').replaceChildren();
}

// ------------------------------------------------------------------ image attachments

export class Attachments {
  constructor(container, complain) {
    this.container = container;
    this.complain = complain;
    this.items = [];
  }

  get paths() {
    return this.items.map((item) => item.path);
  }

  async upload(files) {
    for (const file of files) {
      if (!file.type.startsWith('image/')) {
        this.complain(`${file.name}: only images can be attached`);
        continue;
      }
      const form = new FormData();
      form.append('file', file, file.name || 'pasted.png');
      const { ok, data } = await api('POST', '/api/upload', form);
      if (ok) this.add(data.path, file);
      if (ok && data.warning) this.complain(`${data.path}: ${data.warning}`);
      else if (!ok) this.complain(`${file.name || 'image'}: ${data.error || 'upload failed'}`);
    }
  }

  add(path, file) {
    const chip = el('div', 'attachment');
    const img = el('img');
    img.alt = '';
    img.src = URL.createObjectURL(file);
    const remove = el('button', 'small', '✕');
    remove.type = 'button';
    remove.setAttribute('aria-label', `remove ${path}`);
    const item = { path, chip, url: img.src };
    remove.addEventListener('click', () => this.remove(item));
    chip.append(img, el('span', null, path), remove);
    this.container.append(chip);
    this.container.hidden = false;
    this.items.push(item);
  }

  remove(item) {
    this.items = this.items.filter((other) => other !== item);
    item.chip.remove();
    URL.revokeObjectURL(item.url);
    this.container.hidden = !this.items.length;
  }

  clear() {
    for (const item of [...this.items]) this.remove(item);
  }
}

// ------------------------------------------------------------------ input history

export class InputHistory {
  constructor(input, key = 'lmagent.history', limit = 100) {
    this.input = input;
    this.key = key;
    this.limit = limit;
    this.index = -1;
    this.draft = '';
    try {
      const saved = JSON.parse(localStorage.getItem(key) || '[]');
      this.items = Array.isArray(saved) ? saved.filter((x) => typeof x === 'string') : [];
    } catch (e) {
      this.items = [];
    }
  }

  remember(text) {
    if (!text) return;
    if (this.items[this.items.length - 1] !== text) this.items.push(text);
    this.items = this.items.slice(-this.limit);
    this.index = -1;
    try { localStorage.setItem(this.key, JSON.stringify(this.items)); } catch (e) { /* full */ }
  }

  // Up (-1) or down (+1); false when there was nothing to recall.
  recall(step) {
    if (!this.items.length) return false;
    let index = this.index;
    if (index === -1) {
      if (step > 0) return false;
      this.draft = this.input.value;
      index = this.items.length;
    }
    index = Math.max(0, index + step);
    if (index >= this.items.length) {
      this.index = -1;
      this.input.value = this.draft;
    } else {
      this.index = index;
      this.input.value = this.items[index];
    }
    this.input.setSelectionRange(this.input.value.length, this.input.value.length);
    return true;
  }
}
