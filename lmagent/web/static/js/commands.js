// The REPL's slash commands in the chat box. `app` gives what they act on: the log, the session
// shown, the mode, and the page's navigation (open a session, start a new chat, side panel).

import { api, oneLine } from './util.js';

export const COMMANDS = {
  '/help': 'show the commands',
  '/sessions': 'list saved sessions',
  '/session [ID]': 'show the current session, or open another',
  '/new': 'start a new session with the next message',
  '/mode [auto|normal|manual]': 'show or set the permission mode',
  '/plan': 'plan the next task and ask for approval first',
  '/todo': 'show the todos and plan of the current session',
  '/status': 'show model, workspace, sandbox, mode and the run',
  '/soul': 'show the personality file (.lmagent/.soul.md)',
};

const HANDLERS = {
  '/help': help,
  '/sessions': sessions,
  '/session': session,
  '/new': newSession,
  '/mode': mode,
  '/plan': plan,
  '/todo': todo,
  '/status': status,
  '/soul': soul,
};

export async function runCommand(line, app) {
  const [name, ...rest] = line.split(/\s+/);
  const handler = HANDLERS[name.toLowerCase()];
  if (!handler) {
    app.log.note(`unknown command ${name}; /help lists them`);
    return;
  }
  await handler(rest.join(' ').trim(), app);
}

function help(arg, app) {
  const lines = Object.entries(COMMANDS).map(([c, d]) => `${c.padEnd(28)} ${d}`);
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

async function todo(arg, app) {
  const id = app.view();
  if (!id) {
    app.log.note('no session yet; type a task first');
    return;
  }
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
