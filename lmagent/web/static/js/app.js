// LMAgent web UI: follows the server's event stream, shows sessions and runs, sends tasks.
// Every piece of text from the model, tools, files or sessions reaches the page through
// textContent; only model Markdown goes through marked + DOMPurify (util.js), and the page's
// CSP (no inline script, Trusted Types) stops anything that would slip through.

import { runCommand } from './commands.js';
import { startEveryday } from './everyday.js';
import { ChatLog } from './log.js';
import { approvalBody, attachCheckpoints } from './review.js';
import {
  Attachments,
  InputHistory,
  closePreview,
  closeSide,
  markCurrentSession,
  openSide,
  refreshFiles,
  refreshSessions,
  selectTab,
  startCollapsedOnPhones,
  toggleSide,
} from './panels.js';
import { $, api, clock, el, randomId } from './util.js';

const STREAM_EVENTS = [
  'run', 'session', 'token', 'thinking', 'tool_call', 'tool_result', 'status', 'iteration', 'progress',
  'permission_request', 'permission_answered', 'mode', 'done', 'error', 'resync', 'closed',
];

const clientId = sessionStorage.getItem('lmagent.client') || randomId();
sessionStorage.setItem('lmagent.client', clientId);

const state = {
  view: null, // the session shown in the log (null: a new chat)
  live: false, // the log follows the active run of `view`
  run: null, // {run_id, session_id, base_messages, startedAt, iterations, max}
  es: null,
  lastEventId: '',
  planNext: false,
  questions: new Map(),
  timer: null,
  queue: null, // events held while a transcript loads
  started: new Set(), // the runs whose start the stream has shown
};

const log = new ChatLog($('log'));
const attachments = new Attachments($('attachments'), showNotice);
const history = new InputHistory($('input'));

// ------------------------------------------------------------------ what the log shows

function setView(id, live, title) {
  if (id !== state.view || title) showTitle(id ? title || `Session ${id}` : '');
  state.view = id;
  state.live = live;
  if (id) sessionStorage.setItem('lmagent.view', id);
  else sessionStorage.removeItem('lmagent.view');
  $('view-banner').hidden = !id;
  markCurrentSession(id);
}

function showTitle(name) {
  const title = name.replace(/\s+/g, ' ').slice(0, 80);
  $('view-banner-text').textContent = title ? `${title} — typing continues it` : '';
  $('view-banner').title = title;
}

// The session's first `limit` messages (all without it), drawn from the events the server
// rebuilds from its transcript, by the renderer that draws a live run.
async function loadSession(id, limit) {
  const upto = limit === undefined ? '' : `&messages=${limit}`;
  const { ok, data } = await api('GET', `/api/sessions/${encodeURIComponent(id)}?events=1${upto}`);
  if (!ok) {
    log.note(data.error || 'cannot open that session');
    return null;
  }
  showTitle(data.meta.title || data.meta.task || id);
  for (const event of data.events) log.draw(event.type, event);
  log.endStep();
  attachCheckpoints(log, id);
  return data;
}

async function openSession(id) {
  closeSide();
  if (state.run && state.run.session_id === id) {
    await followRun(state.run);
    return;
  }
  clearView();
  setView(id, false);
  const data = await loadSession(id);
  const meta = data && data.meta;
  if (meta && meta.status && meta.status !== 'running') {
    log.ending({
      status: meta.status,
      message: meta.last_message || meta.error || '',
      wait_until: meta.wait_until,
      summary: meta.did,
      iterations: meta.iterations,
      tokens: meta.tokens,
    });
  }
}

// The active run's session: its earlier messages from disk, then the run replayed live.
async function followRun(run) {
  clearView();
  setView(run.session_id, true);
  await loadSession(run.session_id, run.base_messages);
  connect(true);
}

function newChat() {
  clearView();
  setView(null, false);
  $('input').focus();
}

function clearView() {
  log.clear();
  hideQuestions();
}

// ------------------------------------------------------------------ run state

function setRun(run) {
  state.run = run;
  const pill = $('run-state');
  const mine = run && run.session_id === state.view;
  pill.className = `pill ${run ? (mine ? 'running' : 'other') : 'idle'}`;
  pill.textContent = run ? (mine ? 'running' : 'running (other session)') : 'idle';
  pill.title = run ? `session ${run.session_id}` : 'no run';
  $('stop').hidden = !run;
  $('send').hidden = !!run;
  clearInterval(state.timer);
  state.timer = run ? setInterval(progress, 1000) : null;
  progress();
}

function progress() {
  const run = state.run;
  const target = $('run-progress');
  target.replaceChildren();
  if (!run) return;
  if (run.iterations) {
    const count = `${run.iterations}${run.max ? '/' + run.max : ''} · `;
    target.append(el('span', 'it-label', 'iteration '), count);
  }
  target.append(clock((Date.now() - run.startedAt) / 1000));
}

function setMode(mode) {
  if (mode) $('mode-select').value = mode;
}

function runFromInfo(info) {
  return {
    run_id: info.run_id,
    session_id: info.session_id,
    base_messages: info.base_messages,
    startedAt: Date.now() - (info.elapsed || 0) * 1000,
    iterations: info.iterations || 0,
    max: info.max_iterations || 0,
  };
}

// ------------------------------------------------------------------ permission prompts

function showQuestion(event) {
  if (state.questions.has(event.request_id)) return;
  const plan = event.tool === 'plan';
  const card = el('div', 'question-card');
  card.dataset.id = event.request_id;
  if (plan) {
    const list = el('ol');
    for (const step of (event.arguments && event.arguments.steps) || []) {
      list.append(el('li', null, step.description));
    }
    card.append(el('div', 'question', 'Approve this plan?'), list);
  } else {
    card.append(el('div', 'question', `Allow ${event.tool}?`), approvalBody(event.tool, event.arguments, event.diff));
  }
  const actions = el('div', 'actions');
  const choices = [
    ['allow', plan ? 'Approve' : 'Allow'],
    ['deny', plan ? 'Reject' : 'Deny'],
    ['auto', 'Auto (rest of run)'],
  ];
  for (const [decision, label] of choices) {
    const button = el('button', decision, label);
    button.type = 'button';
    button.addEventListener('click', () => answer(event.request_id, decision, card));
    actions.append(button);
  }
  card.append(actions);
  $('permission').append(card);
  $('permission').hidden = false;
  state.questions.set(event.request_id, card);
}

async function answer(requestId, decision, card) {
  const buttons = card.querySelectorAll('button');
  for (const button of buttons) button.disabled = true;
  const { ok, status } = await api('POST', '/api/permission', { request_id: requestId, decision });
  if (ok || status === 404) dropQuestion(requestId); // 404: already answered elsewhere
  else for (const button of buttons) button.disabled = false;
}

function dropQuestion(requestId) {
  const card = state.questions.get(requestId);
  if (card) card.remove();
  state.questions.delete(requestId);
  $('permission').hidden = state.questions.size === 0;
}

function hideQuestions() {
  for (const id of Array.from(state.questions.keys())) dropQuestion(id);
}

// ------------------------------------------------------------------ the event stream

function connect(fromRun) {
  if (state.es) state.es.close();
  let url = '/api/stream';
  if (fromRun) url += '?from=run';
  else if (state.lastEventId) url += `?last_event_id=${encodeURIComponent(state.lastEventId)}`;
  const source = new EventSource(url); // reconnects by itself, sending Last-Event-ID
  source.addEventListener('open', () => setConnected(true));
  for (const type of STREAM_EVENTS) {
    source.addEventListener(type, (message) => {
      if (state.es !== source) return; // closed, with events still queued: the new one has them
      if (message.lastEventId) state.lastEventId = message.lastEventId;
      let event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      receive(type, event);
    });
  }
  source.addEventListener('error', () => {
    if (state.es !== source) return;
    setConnected(false);
    if (source.readyState === EventSource.CLOSED) setTimeout(reconnect, 1500);
  });
  state.es = source;
}

function setConnected(open) {
  document.body.dataset.stream = open ? 'open' : 'down';
  if (open) {
    setRun(state.run);
  } else {
    $('run-state').classList.add('offline');
    $('run-state').textContent = 'reconnecting…';
  }
}

async function reconnect() {
  try {
    await api('GET', '/api/status'); // goes to the PIN page when the sign-in ended
  } catch (e) {
    setTimeout(reconnect, 3000);
    return;
  }
  connect(false);
}

// Events wait while an earlier one loads a transcript, so the log keeps their order.
function receive(type, event) {
  if (state.queue) {
    state.queue.push([type, event]);
    return;
  }
  const pending = handle(type, event);
  if (!pending || typeof pending.then !== 'function') return;
  state.queue = [];
  pending.catch(() => null).then(() => {
    const queued = state.queue;
    state.queue = null;
    for (let i = 0; i < queued.length; i += 1) {
      if (state.queue) {
        state.queue.push(...queued.slice(i));
        break;
      }
      receive(...queued[i]);
    }
  });
}

function handle(type, event) {
  switch (type) {
    case 'run': return onRun(event);
    case 'resync': return onResync(event);
    case 'mode': return setMode(event.mode);
    case 'closed': return onClosed(event);
    default: break;
  }
  const run = state.run;
  if (!run || event.session_id !== run.session_id) return undefined;
  const shown = state.live && state.view === event.session_id;
  if (event.agent_id) {
    if (shown) log.subAgent(event);
    return undefined;
  }
  if (type === 'iteration') {
    run.iterations = event.n;
    run.max = event.max;
    progress();
  } else if (type === 'permission_request') {
    showQuestion(event);
  } else if (type === 'permission_answered') {
    dropQuestion(event.request_id);
  } else if (type === 'session') {
    setMode(event.mode);
  } else if (type === 'done') {
    hideQuestions();
    setRun(null);
    refreshSessions(() => state.view, openSession);
  }
  if (shown) log.draw(type, event);
  return undefined;
}

function onRun(event) {
  state.started.add(event.run_id);
  const mine = event.client_id === clientId || event.session_id === state.view;
  if (mine) {
    const other = state.view !== event.session_id;
    if (other) clearView();
    setView(event.session_id, true, other && !event.resumed ? event.message : '');
  }
  // replayed after a reload, the run keeps the start the status gave it
  const known = state.run && state.run.run_id === event.run_id;
  setRun(known ? state.run : runFromInfo({ ...event, elapsed: 0 }));
  if (mine) {
    setMode(event.mode);
    log.draw('user', { text: event.message });
  }
  refreshSessions(() => state.view, openSession);
}

// The events since the client's last one are gone from the server's buffer: reload the
// session from disk, plus the reply still being streamed.
async function onResync(event) {
  const info = event.run;
  if (!info) return;
  const active = info.active;
  setRun(active ? runFromInfo(info) : null);
  if (event.session_id !== state.view) return;
  clearView();
  setView(event.session_id, active);
  await loadSession(event.session_id, event.messages);
  if (event.thinking) log.thinkingText(event.thinking);
  if (event.partial) log.token(event.partial);
  for (const question of info.pending || []) showQuestion(question);
  if (!active && info.ending) log.ending(info.ending);
}

function onClosed(event) {
  if (state.es) state.es.close();
  state.es = null;
  const notice = $('notice');
  notice.textContent = event.reason === 'superseded'
    ? 'Live updates paused: too many tabs are open. They resume when this tab is shown again.'
    : 'The server closed the live stream.';
  notice.hidden = false;
}

// ------------------------------------------------------------------ sending

async function send() {
  const input = $('input');
  const text = input.value.trim();
  if (!text && !attachments.items.length) return;
  history.remember(text);
  input.value = '';
  autosize();
  if (text.startsWith('/')) {
    await runCommand(text, commandContext);
    return;
  }
  let message = text;
  if (attachments.items.length) {
    message += `${message ? '\n\n' : ''}Attached image(s), in the workspace: ${attachments.paths.join(', ')}`;
  }
  $('send').disabled = true;
  try {
    const body = { message, client_id: clientId, plan: state.planNext };
    if (state.view) body.session_id = state.view;
    const { status, data } = await api('POST', '/api/chat', body);
    if (status === 202) {
      state.planNext = false;
      attachments.clear();
      if (!state.started.has(data.run_id)) {
        // The stream has not shown this run's start (it connected late): replay the run. (A
        // quick run may have ended before this answer came: its start was shown, no replay.)
        if (state.view !== data.session_id) clearView();
        setView(data.session_id, true, body.session_id ? '' : message);
        connect(true);
      }
      return;
    }
    input.value = text;
    showNotice(status === 429
      ? 'A run is already active. Wait for it to finish, or press Stop first.'
      : (data.error || `the server answered ${status}`));
  } catch (e) {
    input.value = text;
    showNotice('The server cannot be reached.');
  } finally {
    $('send').disabled = false;
  }
}

function showNotice(text) {
  const notice = $('notice');
  notice.textContent = text;
  notice.hidden = false;
  clearTimeout(showNotice.timer);
  showNotice.timer = setTimeout(() => { notice.hidden = true; }, 6000);
}

function autosize() {
  const input = $('input');
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight + 2, window.innerHeight * 0.4)}px`;
}

const commandContext = {
  log,
  view: () => state.view,
  setMode,
  openSession,
  newChat,
  openSide,
  planNext: () => { state.planNext = true; },
};

// ------------------------------------------------------------------ wiring

function wireComposer() {
  const input = $('input');
  $('composer').addEventListener('submit', (event) => { event.preventDefault(); send(); });
  input.addEventListener('keydown', (event) => {
    const before = input.value.slice(0, input.selectionStart);
    const after = input.value.slice(input.selectionEnd);
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    } else if (event.key === 'ArrowUp' && !before.includes('\n') && history.recall(-1)) {
      event.preventDefault();
      autosize();
    } else if (event.key === 'ArrowDown' && !after.includes('\n') && history.recall(1)) {
      event.preventDefault();
      autosize();
    }
  });
  input.addEventListener('input', autosize);
  input.addEventListener('paste', (event) => {
    const files = Array.from(event.clipboardData ? event.clipboardData.files : []);
    if (files.length) {
      event.preventDefault();
      attachments.upload(files);
    }
  });
  $('stop').addEventListener('click', async () => {
    $('stop').disabled = true;
    try { await api('POST', '/api/stop', {}); } finally { $('stop').disabled = false; }
  });
  $('attach').addEventListener('click', () => $('file-input').click());
  $('file-input').addEventListener('change', (event) => {
    attachments.upload(Array.from(event.target.files));
    event.target.value = '';
  });
}

function wireDrop() {
  let depth = 0;
  const overlay = $('drop-overlay');
  window.addEventListener('dragenter', (event) => {
    if (!event.dataTransfer || !Array.from(event.dataTransfer.types).includes('Files')) return;
    depth += 1;
    overlay.hidden = false;
  });
  window.addEventListener('dragleave', () => {
    depth = Math.max(0, depth - 1);
    if (!depth) overlay.hidden = true;
  });
  window.addEventListener('dragover', (event) => event.preventDefault());
  window.addEventListener('drop', (event) => {
    event.preventDefault();
    depth = 0;
    overlay.hidden = true;
    const files = Array.from(event.dataTransfer ? event.dataTransfer.files : []);
    if (files.length) attachments.upload(files);
  });
}

function wireChrome() {
  $('mode-select').addEventListener('change', async (event) => {
    const { ok, data } = await api('POST', '/api/mode', { mode: event.target.value });
    if (ok) setMode(data.mode);
  });
  $('new-chat').addEventListener('click', newChat);
  $('logout').addEventListener('click', async () => {
    await api('POST', '/api/logout', {}).catch(() => null);
    window.location.replace('/');
  });
  $('toggle-side').addEventListener('click', toggleSide);
  $('tab-sessions').addEventListener('click', () => selectTab('sessions'));
  $('tab-files').addEventListener('click', () => selectTab('files'));
  $('refresh-sessions').addEventListener('click', () => refreshSessions(() => state.view, openSession));
  $('refresh-files').addEventListener('click', refreshFiles);
  $('preview-close').addEventListener('click', closePreview);
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !$('preview').hidden) closePreview();
  });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && !state.es) {
      $('notice').hidden = true;
      start();
    }
  });
  startCollapsedOnPhones();
}

async function start() {
  const { ok, data } = await api('GET', '/api/status');
  if (!ok) return;
  setMode(data.mode);
  refreshSessions(() => state.view, openSession);
  if (data.run) {
    setRun(runFromInfo(data.run));
    await followRun(data.run);
    return;
  }
  setRun(null);
  const saved = sessionStorage.getItem('lmagent.view');
  if (saved && saved !== state.view) await openSession(saved);
  connect(false);
}

wireComposer();
wireDrop();
wireChrome();
startEveryday();
start();
