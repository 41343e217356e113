// The chat log: messages, streamed tokens, thinking, tool rows, sub-agent rows and endings.

import { clock, el, localTime, oneLine, pretty, renderMarkdown, shortArgs } from './util.js';
import { changeView, resultView } from './review.js';

const ENDINGS = {
  completed: 'Done',
  blocked: 'Blocked',
  waiting: 'Waiting',
  interrupted: 'Stopped',
  error: 'Error',
  max_iterations: 'Reached the iteration limit',
};

function progressText(event) {
  const elapsed = clock(event.elapsed || 0);
  if (event.phase === 'tool') return `running ${event.name} · ${elapsed}`;
  if (!event.total) return `reading the prompt · ~${(event.tokens || 0).toLocaleString()} tokens · ${elapsed}`;
  const done = event.processed || 0;
  const left = event.eta !== undefined ? ` · ~${clock(event.eta)} left` : '';
  return `reading the prompt ${Math.floor((100 * done) / event.total)}% · ${done.toLocaleString()}/${event.total.toLocaleString()} tokens · ${elapsed}${left}`;
}

export class ChatLog {
  constructor(element) {
    this.element = element;
    this.current = null; // the assistant message being streamed
    this.thinking = null;
    this.tools = new Map();
    this.agents = new Map();
    this.waiting = null; // the progress line while the model reads the prompt or a tool runs
    this.pending = null; // the tool row waiting for its result
    this.stick = true; // follow new output unless the reader scrolled up
    this.scrollPending = false;
    this.placed = 0; // where the page last put the scroll position itself
    // The scroll position is read only on scroll events and written once a frame, never per
    // token, so streaming never forces a layout. A scroll to where the page put it (or where
    // emptying the log left it) is not the reader's.
    element.addEventListener('scroll', () => {
      if (element.scrollTop !== this.placed) this.stick = this.atBottom();
    }, { passive: true });
  }

  atBottom() {
    const log = this.element;
    return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  }

  follow() {
    if (!this.stick || this.scrollPending) return;
    this.scrollPending = true;
    requestAnimationFrame(() => {
      this.scrollPending = false;
      if (this.stick) this.scrollTo(this.element.scrollHeight);
    });
  }

  scrollTo(top) {
    this.element.scrollTop = top;
    this.placed = this.element.scrollTop;
  }

  // What the reader asked for (a slash command's answer): in view even if they had scrolled
  // up; its top first when it is taller than the log.
  reveal(node) {
    if (!node) return;
    const log = this.element;
    const top = node.getBoundingClientRect().top - log.getBoundingClientRect().top + log.scrollTop;
    this.scrollTo(node.offsetHeight > log.clientHeight ? top - 8 : log.scrollHeight);
    this.stick = this.atBottom();
  }

  add(node) {
    this.element.append(node);
    this.follow();
    return node;
  }

  clear() {
    this.endStep();
    this.element.replaceChildren();
    this.placed = this.element.scrollTop; // emptied: the scroll that follows is not the reader's
    this.stick = true;
    this.tools.clear();
    this.agents.clear();
    this.waiting = null;
    this.pending = null;
  }

  // The one renderer of events: a live run's as they come, a reopened session's as the server
  // rebuilds them from its transcript (lmagent/web/replay.py).
  draw(type, event) {
    switch (type) {
      case 'user': this.user(event.text); break;
      case 'note': this.note(event.text); break;
      case 'iteration': this.endStep(); break;
      case 'token': this.token(event.text); break;
      case 'thinking': this.thinkingText(event.text); break;
      case 'tool_call': this.toolCall(event.id, event.name, event.arguments); break;
      case 'tool_result': this.toolResult(event.id, event.name, event.result, event.success, event); break;
      case 'status': this.status(event.message); break;
      case 'progress': this.progress(event); break;
      case 'permission_answered': this.status(`permission: ${event.decision}`); break;
      case 'error': this.error(event.message); break;
      case 'done': this.ending(event); break;
      default: break;
    }
  }

  note(text) {
    return this.add(el('div', 'note', text));
  }

  // A line about the call waiting for its result (its permission) goes before that call's row,
  // so it reads before the result folded into the row.
  status(text) {
    const line = el('div', 'status-line', `· ${text}`);
    if (!this.pending) return this.add(line);
    this.pending.details.before(line);
    return line;
  }

  error(text) {
    this.endStep();
    return this.add(el('div', 'error-line', text));
  }

  user(text) {
    this.endStep();
    this.stick = true; // the reader's own message: follow what answers it
    return this.add(el('div', 'msg user', text));
  }

  // ---------------------------------------------------------------- progress

  // One line, updated in place: what is being waited for, for how long, and a bar with the
  // time left when the server reports its reading of the prompt. Gone when the wait ends.
  progress(event) {
    if (event.done) {
      if (this.waiting) this.waiting.node.remove();
      this.waiting = null;
      return;
    }
    if (!this.waiting) {
      const node = el('div', 'progress-line');
      const bar = el('progress');
      const text = el('span');
      node.append(text, bar);
      this.waiting = { node, bar, text };
    }
    this.add(this.waiting.node); // kept last in the log
    const { bar, text } = this.waiting;
    bar.hidden = !event.total;
    if (event.total) {
      bar.max = event.total;
      bar.value = event.processed || 0;
    }
    text.textContent = progressText(event);
  }

  // ---------------------------------------------------------------- streaming

  streaming() {
    if (this.current) return this.current;
    const wrap = el('div', 'msg assistant');
    const body = el('div', 'md');
    const tailSpan = el('span', 'tail');
    const tail = document.createTextNode('');
    tailSpan.append(tail);
    wrap.append(body, tailSpan);
    this.add(wrap);
    this.current = { wrap, body, tail, raw: '', timer: null, delay: 60 };
    return this.current;
  }

  token(text) {
    const message = this.streaming();
    message.raw += text;
    message.tail.appendData(text); // the page holds the token now; Markdown follows shortly
    if (!message.timer) message.timer = setTimeout(() => this.render(message), message.delay);
    this.follow();
  }

  // Markdown of the whole reply so far; the pause grows with the cost of rendering it.
  render(message) {
    clearTimeout(message.timer);
    message.timer = null;
    const started = performance.now();
    renderMarkdown(message.body, message.raw);
    message.tail.data = '';
    message.delay = Math.min(1000, Math.max(60, 4 * (performance.now() - started)));
  }

  thinkingText(text) {
    if (!this.thinking) {
      const details = el('details', 'thinking');
      const pre = el('pre');
      const node = document.createTextNode('');
      pre.append(node);
      details.append(el('summary', null, 'Thinking…'), pre);
      if (this.current) this.element.insertBefore(details, this.current.wrap);
      else this.add(details);
      this.thinking = { details, node };
    }
    this.thinking.node.appendData(text);
  }

  endStep() {
    if (this.thinking) this.thinking.details.querySelector('summary').textContent = 'Thinking';
    if (this.current) {
      this.render(this.current);
      if (!this.current.raw.trim()) this.current.wrap.remove();
    }
    this.current = null;
    this.thinking = null;
    this.pending = null;
  }

  // ---------------------------------------------------------------- tools and sub-agents

  toolCall(id, name, args) {
    this.endStep();
    let row = id ? this.tools.get(id) : null;
    if (row) return row;
    const details = el('details', 'tool pending');
    const summary = el('summary');
    summary.append(el('span', 'tool-icon', '→'), el('span', 'tool-name', name), el('span', 'tool-args', shortArgs(args)));
    const body = el('div', 'tool-body');
    body.append(el('div', 'label', 'arguments'), el('pre', null, pretty(args)));
    details.append(summary, body);
    this.add(details);
    row = { details, summary, body };
    if (id) this.tools.set(id, row);
    this.pending = row;
    return row;
  }

  toolResult(id, name, result, success, event = {}) {
    const row = this.tools.get(id) || this.toolCall(id, name, '');
    if (this.pending === row) this.pending = null;
    row.details.classList.remove('pending');
    row.details.classList.add(success ? 'ok' : 'fail');
    row.summary.querySelector('.tool-icon').textContent = success ? '✓' : '✗';
    const error = result && typeof result === 'object' ? result.error : '';
    if (!success && error) row.summary.append(el('span', 'tool-error', oneLine(error, 120)));
    row.body.append(el('div', 'label', 'result'), resultView(result));
    if (result && typeof result === 'object' && typeof result.output === 'string') row.details.open = true;
    if (event.step) this.change(id, event.session_id, event, event.diff);
  }

  // A changing step's diff and "Restore files to here", shown under its tool row.
  change(id, sessionId, step, diff) {
    const row = this.tools.get(id);
    if (!row || row.change) return;
    row.change = changeView(sessionId, step, diff, (text) => this.note(text));
    row.details.after(row.change);
  }

  subAgent(event) {
    let entry = this.agents.get(event.agent_id);
    if (!entry) {
      entry = { node: this.add(el('div', 'subagent')), iteration: 0, last: '', status: 'working' };
      this.agents.set(event.agent_id, entry);
    }
    switch (event.type) {
      case 'iteration': entry.iteration = event.n; break;
      case 'tool_call': entry.last = `→ ${event.name} ${shortArgs(event.arguments)}`; break;
      case 'tool_result': entry.last = `${event.success ? '✓' : '✗'} ${event.name}`; break;
      case 'status': entry.last = `· ${event.message}`; break;
      case 'error': entry.last = `error: ${event.message}`; break;
      case 'done':
        entry.status = `finished: ${event.status}`;
        entry.node.classList.add(event.status === 'completed' ? 'finished' : 'failed');
        break;
      default: return;
    }
    const parts = [`↳ sub-agent ${event.agent_id} (depth ${event.depth || 1})`];
    if (entry.iteration) parts.push(`iteration ${entry.iteration}`);
    parts.push(entry.status);
    if (entry.last) parts.push(oneLine(entry.last, 120));
    entry.node.textContent = parts.join(' · ');
  }

  // ---------------------------------------------------------------- endings

  ending(info) {
    this.endStep();
    const status = info.status || 'error';
    const box = el('div', `ending ${status}`);
    let title = ENDINGS[status] || status;
    if (status === 'waiting' && info.wait_until) title += ` until ${localTime(info.wait_until)}`;
    box.append(el('div', 'title', title));
    const facts = [];
    if (info.iterations !== undefined && info.iterations !== null) facts.push(`${info.iterations} iterations`);
    if (info.tokens) facts.push(`${info.tokens} tokens`);
    if (info.elapsed) facts.push(clock(info.elapsed));
    let detail = status === 'completed' ? '' : (info.message || '');
    if (info.summary) detail = (detail ? detail + '\n' : '') + info.summary;
    if (facts.length) detail = (detail ? detail + '\n' : '') + facts.join(' · ');
    if (detail) box.append(el('div', 'detail', detail));
    return this.add(box);
  }
}
