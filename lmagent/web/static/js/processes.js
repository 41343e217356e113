// The background processes panel: the agent's latest background processes, each with the end
// of its output and, while it runs, a Stop button. Refreshed every second while the page shows.
import { $, api, el } from './util.js';

const POLL_MS = 1000;

async function refresh() {
  const answer = await api('GET', '/api/processes').catch(() => null);
  if (answer && answer.ok) render(answer.data.processes || []);
}

function render(processes) {
  const panel = $('processes');
  panel.hidden = processes.length === 0;
  panel.replaceChildren(el('div', 'processes-title muted', 'Background processes'), ...processes.map(row));
}

function row(process) {
  const item = el('div', process.running ? 'process running' : 'process');
  item.dataset.processId = process.process_id;
  const head = el('div', 'process-head');
  const state = process.running ? 'running' : `exited ${process.exit_code}`;
  head.append(
    el('span', 'pill', process.process_id),
    el('code', 'process-command', process.command),
    el('span', 'process-state muted', state),
  );
  if (process.running) {
    const stop = el('button', 'small danger process-stop', 'Stop');
    stop.type = 'button';
    stop.addEventListener('click', () => kill(process.process_id, stop));
    head.append(stop);
  }
  const output = el('pre', 'process-output', process.output);
  item.append(head, output, el('div', 'process-log muted', `log: ${process.log}`));
  return item;
}

async function kill(id, button) {
  button.disabled = true;
  await api('POST', `/api/processes/${encodeURIComponent(id)}/kill`).catch(() => null);
  refresh();
}

setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
refresh();
