// Review and undo: a step's diff (coloured, collapsible per file), a command's output as a
// terminal block, approval cards that show the change or command about to run, and
// "Restore files to here" with a confirmation that lists the files it will change.
// All text reaches the page through textContent: escapes in output show as text.

import { api, el, pretty } from './util.js';

const OUTPUT_LINES = 400; // lines of a command's output kept on the page (the transcript has all)

function parsed(value) {
  if (typeof value !== 'string') return value;
  try { return JSON.parse(value); } catch (e) { return value; }
}

// ---------------------------------------------------------------- diffs

function lineClass(line) {
  if (line.startsWith('+++') || line.startsWith('---')) return 'd-head';
  if (line.startsWith('+')) return 'd-add';
  if (line.startsWith('-')) return 'd-del';
  if (line.startsWith('@@')) return 'd-hunk';
  return 'd-ctx';
}

function fileChunks(diff) {
  const chunks = [];
  for (const line of diff.replace(/\n$/, '').split('\n')) {
    const head = /^diff --git a\/(.*) b\/(.*)$/.exec(line);
    if (head || !chunks.length) chunks.push({ path: head ? head[2] : '', lines: [] });
    if (!head) chunks[chunks.length - 1].lines.push(line);
  }
  return chunks;
}

export function diffView(diff) {
  const box = el('div', 'diff-view');
  for (const chunk of fileChunks(diff)) {
    const details = el('details', 'diff-file');
    details.open = true;
    const added = chunk.lines.filter((l) => l.startsWith('+') && !l.startsWith('+++')).length;
    const removed = chunk.lines.filter((l) => l.startsWith('-') && !l.startsWith('---')).length;
    const summary = el('summary');
    summary.append(el('span', 'diff-path', chunk.path), el('span', 'd-add', ` +${added}`), el('span', 'd-del', ` −${removed}`));
    const pre = el('pre', 'diff');
    for (const line of chunk.lines) {
      if (line.startsWith('index ') || line.startsWith('new file mode') || line.startsWith('deleted file mode')) continue;
      pre.append(el('span', lineClass(line), `${line}\n`));
    }
    details.append(summary, pre);
    box.append(details);
  }
  return box;
}

// ---------------------------------------------------------------- command output

export function terminalBlock(text, className = '') {
  const lines = String(text).replace(/\n$/, '').split('\n');
  const pre = el('pre', `terminal ${className}`.trim());
  if (lines.length > OUTPUT_LINES) {
    pre.append(el('span', 'cut', `… ${lines.length - OUTPUT_LINES} earlier lines not shown\n`));
  }
  pre.append(document.createTextNode(lines.slice(-OUTPUT_LINES).join('\n')));
  return pre;
}

// A tool result: a command's output as a terminal block and the rest as fields; others as JSON.
export function resultView(result) {
  const value = parsed(result);
  if (!value || typeof value !== 'object' || typeof value.output !== 'string') {
    return el('pre', null, pretty(value));
  }
  const box = el('div', 'result-view');
  const { output, ...rest } = value;
  const failed = value.success === false;
  if (failed && value.exit_code !== undefined && value.exit_code !== null) {
    box.append(el('div', 'exit-code', `exit code ${value.exit_code}`));
  }
  box.append(terminalBlock(output || '(no output)', failed ? 'failed' : ''));
  delete rest.success;
  delete rest.exit_code;
  if (Object.keys(rest).length) box.append(el('pre', 'result-rest', pretty(rest)));
  return box;
}

// ---------------------------------------------------------------- approval cards

// What a permission card shows: the change a write or edit would make (`diff`, worked out on
// the server against the file as it is), the command for shell, else the arguments.
export function approvalBody(tool, args, diff) {
  if (diff) return diffView(diff);
  const a = parsed(args) || {};
  if (tool === 'shell' && typeof a === 'object' && typeof a.command === 'string') {
    const box = el('div', 'approval-command');
    box.append(terminalBlock(`$ ${a.command}`));
    const extra = { ...a };
    delete extra.command;
    if (Object.keys(extra).length) box.append(el('pre', null, pretty(extra)));
    return box;
  }
  return el('pre', null, pretty(args));
}

// ---------------------------------------------------------------- restore

async function confirmRestore(box, sessionId, step, done) {
  const url = `/api/sessions/${encodeURIComponent(sessionId)}/checkpoints/${step.step}`;
  const { ok, data } = await api('GET', url);
  box.querySelector('.restore-confirm')?.remove();
  const card = el('div', 'restore-confirm');
  if (!ok) {
    card.append(el('div', 'error-line', data.error || 'cannot restore this step'));
    box.append(card);
    return;
  }
  if (!(data.files || []).length) {
    const nothing = el('div', 'question', `The files are already as they were before step ${step.step}: restoring would change nothing.`);
    const close = el('button', 'deny', 'Close');
    close.type = 'button';
    close.addEventListener('click', () => card.remove());
    const actions = el('div', 'actions');
    actions.append(close);
    card.append(nothing, actions);
    box.append(card);
    return;
  }
  card.append(el('div', 'question', `Restore the files to how they were before step ${step.step}?`));
  const list = el('ul', 'restore-files');
  for (const path of data.files || []) list.append(el('li', null, path));
  card.append(el('div', 'label', `${(data.files || []).length} file(s) will change:`), list);
  if ((data.edited || []).length) {
    card.append(el('div', 'warning', `Edited since the agent's last step (your changes are kept in a checkpoint, so undoing this restore brings them back): ${data.edited.join(', ')}`));
  }
  const actions = el('div', 'actions');
  const go = el('button', 'allow', 'Restore');
  const cancel = el('button', 'deny', 'Cancel');
  go.type = 'button';
  cancel.type = 'button';
  cancel.addEventListener('click', () => card.remove());
  go.addEventListener('click', async () => {
    go.disabled = true;
    const force = (data.edited || []).length > 0;
    const answer = await api('POST', '/api/restore', { session_id: sessionId, step: step.step, force });
    card.remove();
    done(answer.ok
      ? `Restored ${answer.data.changed.length} file(s) to before step ${step.step}; this restore is step ${answer.data.step} and can be undone.`
      : `Restore refused: ${answer.data.error || answer.status}`);
  });
  actions.append(go, cancel);
  card.append(actions);
  box.append(card);
}

// A changing step: its files, its diff and the restore action.
export function changeView(sessionId, step, diff, done) {
  const box = el('div', 'change-view');
  const head = el('div', 'change-head');
  const files = step.changed || [];
  head.append(el('span', 'change-step', `step ${step.step}`), el('span', 'change-files', `${files.length} file(s) changed`));
  const button = el('button', 'restore-button', 'Restore files to here');
  button.type = 'button';
  button.title = `put the files back as they were before step ${step.step}`;
  button.addEventListener('click', () => confirmRestore(box, sessionId, step, done));
  head.append(button);
  box.append(head);
  if (diff) box.append(diffView(diff));
  return box;
}

// After a transcript loads: each changing step's diff and restore action under its tool row.
export async function attachCheckpoints(log, sessionId) {
  const { ok, data } = await api('GET', `/api/sessions/${encodeURIComponent(sessionId)}/checkpoints`);
  if (!ok) return;
  for (const step of data.steps || []) {
    if (step.call_id) log.change(step.call_id, sessionId, step, step.diff);
  }
}
