// The REPL's slash commands in the chat box: the one table (lmagent/commands.py, served at
// /api/commands) and a handler here for each of its names. `app` gives what they act on: the
// log, the session shown, the mode, and the page's navigation.

import { api, oneLine } from './util.js';

const HANDLERS = {
  '/help': help,
  '/status': status,
  '/new': newSession,
  '/session': session,
  '/sessions': sessions,
  '/mode': mode,
  '/plan': plan,
  '/todo': todo,
  '/checkpoints': checkpoints,
  '/undo': undo,
  '/ps': ps,
  '/kill': kill,
  '/soul': soul,
};

let table = null; // the commands, as /api/commands lists them

async function commands() {
  if (!table) {
    const { ok, data } = await api('GET', '/api/commands');
    if (ok) table = data.commands;
  }
  return table || [];
}

// A command's answer is shown where the reader looks, even if they had scrolled up.
export async function runCommand(line, app) {
  const [name, ...rest] = line.split(/\s+/);
  const handler = HANDLERS[name.toLowerCase()];
  const known = (await commands()).some((c) => `/${c.name}` === name.toLowerCase());
  if (!handler || !known) app.log.note(`unknown command ${name}; /help lists them`);
  else await handler(rest.join(' ').trim(), app);
  app.log.reveal(app.log.element.lastElementChild);
}

async function help(arg, app) {
  const listed = await commands();
  const width = Math.max(...listed.map((c) => c.title.length)) + 2;
  const lines = listed.map((c) => `${c.title.padEnd(width)}${c.help}`);
  app.log.note(`${lines.join('\n')}\n\nEnter sends, Shift+Enter adds a line, ↑/↓ recall earlier input.`);
}

async function sessions(arg, app) {
  const { data } = await api('GET', '/api/sessions');
  const lines = (data.sessions || []).slice(0, 30).map(
    (s) => `${s.id}  ${(s.status || '').padEnd(14)} ${oneLine(s.task || '', 70)}`);
  app.log.note(lines.length ? lines.join('\n') : 'no sessions yet');
  app.openSide('sessions');
}

async function session(arg, app) {
  if (arg) await app.openSession(arg);
  else app.log.note(`session: ${app.view() || '(new)'}`);
}

function newSession(arg, app) {
  app.newChat();
  app.log.note('the next message starts a new session');
}

async function mode(arg, app) {
  const { ok, data } = arg
    ? await api('POST', '/api/mode', { mode: arg })
    : await api('GET', '/api/mode');
  if (ok) app.setMode(data.mode);
  app.log.note(ok ? `permission mode: ${data.mode}` : (data.error || 'usage: /mode auto|normal|manual'));
}

function plan(arg, app) {
  app.planNext();
  app.log.note('the next task starts with a plan for your approval');
}

function shownSession(app) {
  const id = app.view();
  if (!id) app.log.note('no session yet; type a task first');
  return id;
}

async function todo(arg, app) {
  const id = shownSession(app);
  if (!id) return;
  const { ok, data } = await api('GET', `/api/sessions/${encodeURIComponent(id)}`);
  if (!ok) {
    app.log.note(data.error || 'cannot read the session');
    return;
  }
  const lines = [];
  for (const step of data.state.plan || []) lines.push(`step ${step.id} [${step.status}] ${step.description}`);
  for (const item of data.state.todos || []) lines.push(`#${item.id} [${item.status}] ${item.description}`);
  app.log.note(lines.length ? lines.join('\n') : 'no todos or plan in this session');
}

async function checkpoints(arg, app) {
  const id = arg || shownSession(app);
  if (!id) return;
  const { ok, data } = await api('GET', `/api/sessions/${encodeURIComponent(id)}/checkpoints`);
  if (!ok) {
    app.log.note(data.error || 'cannot read the checkpoints');
    return;
  }
  const lines = (data.steps || []).map((step) => {
    const when = String(step.time || '').slice(0, 19).replace('T', ' ');
    const tool = step.kind === 'restore' ? `restore (to before step ${step.restored_step})` : (step.tool || '?');
    return `${String(step.step).padEnd(3)} ${when}  ${tool.padEnd(10)}  ${(step.changed || []).join(', ')}`;
  });
  app.log.note(lines.length ? lines.join('\n') : `session ${id} changed no files: it has no checkpoints`);
}

async function undo(arg, app) {
  if (arg !== '' && arg !== 'force') {
    app.log.note('usage: /undo, or /undo force to overwrite files edited since');
    return;
  }
  const id = shownSession(app);
  if (!id) return;
  const { ok, data } = await api('POST', '/api/restore', { session_id: id, force: arg === 'force' });
  if (!ok) {
    app.log.note((data.error || 'the restore failed').replace('--force', '/undo force'));
    return;
  }
  const files = data.changed || [];
  app.log.note(`restored the files to before step ${data.restored_step} of session ${id}: `
    + `${files.length} file(s) changed back (${files.slice(0, 10).join(', ')}). `
    + `This restore is step ${data.step} and can itself be undone`);
}

async function ps(arg, app) {
  const { data } = await api('GET', '/api/processes');
  const lines = (data.processes || []).map((p) => {
    const state = p.running ? 'running' : `exited ${p.exit_code}`;
    return `${p.process_id.padEnd(4)} ${state.padEnd(10)} ${oneLine(p.command, 60)}  (log: ${p.log})`;
  });
  app.log.note(lines.length ? lines.join('\n') : 'no background processes');
}

async function kill(arg, app) {
  if (!arg) {
    app.log.note('usage: /kill ID (the ids are in /ps)');
    return;
  }
  const { data } = await api('POST', `/api/processes/${encodeURIComponent(arg)}/kill`, {});
  app.log.note(data.message || data.error || 'no answer');
}

async function status(arg, app) {
  const { data } = await api('GET', '/api/status?detail=1');
  const run = data.run;
  app.log.note([
    `model: ${data.model || '(the loaded model)'} at ${data.llm_url}`,
    `workspace: ${data.workspace}`,
    `mode: ${data.mode}`,
    `run: ${run ? `${run.status}, session ${run.session_id}, iteration ${run.iterations}` : 'none'}`,
    `session shown: ${app.view() || '(new)'}`,
    ...(data.details || []),
    `version: ${data.version}`,
  ].join('\n'));
}

async function soul(arg, app) {
  const { ok, data } = await api('GET', `/api/file?path=${encodeURIComponent('.lmagent/.soul.md')}`);
  app.log.note(ok && data.content ? data.content : 'no personality set; write one to .lmagent/.soul.md');
}
