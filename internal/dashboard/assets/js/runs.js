// Runs (home): every run, newest first, live; filter, search, submit.
import {h, fill, firstLine, badge, age, dur, ms, tokens, num} from './util.js';
import {api} from './api.js';
import {Poller} from './poll.js';

const statuses = ['', 'queued', 'running', 'succeeded', 'failed', 'cancelled'];
let filter = {status: '', q: ''};

export function runsView(root) {
  const poller = new Poller(listPath(), 1000);
  const status = h('select', {id: 'status-filter', 'aria-label': 'Status',
    onchange: () => { filter.status = status.value; poller.setPath(listPath()); }},
  statuses.map((s) => h('option', {value: s, selected: s === filter.status}, s || 'any status')));
  const search = h('input', {id: 'run-search', type: 'search', placeholder: 'Search id or task', 'aria-label': 'Search', value: filter.q,
    oninput: () => { filter.q = search.value; render(); }});
  const body = h('tbody');
  const note = h('p', {class: 'muted', id: 'runs-note'});
  let runs = [];
  const render = () => {
    const q = filter.q.trim().toLowerCase();
    const now = Date.now();
    const shown = runs.filter((r) => !q || r.run_id.toLowerCase().includes(q) || (r.task || '').toLowerCase().includes(q));
    fill(body, shown.map((r) => runRow(r, now)));
    note.textContent = shown.length ? '' : (runs.length ? 'No run matches.' : 'No runs yet: submit one.');
  };
  const unsub = poller.subscribe((list, err) => {
    if (err) { note.textContent = `Cannot list runs: ${err.message}`; return; }
    runs = list || [];
    render();
  });
  fill(root,
    h('div', {class: 'runs-head'}, h('h1', null, 'Runs'), h('span', {class: 'spacer'}), status, search),
    h('div', {class: 'layout-runs'},
      h('div', {class: 'runs-list'},
        h('table', {class: 'grid runs', id: 'runs'},
          h('thead', null, h('tr', null, ['Status', 'Run', 'Task', 'Attempts', 'Threads', 'Tokens', 'Duration', 'Age'].map((c) => h('th', null, c)))),
          body),
        note),
      submitForm(poller)));
  const tick = setInterval(render, 5000);
  return () => { unsub(); clearInterval(tick); };
}

function listPath() {
  return '/v1/runs?limit=200' + (filter.status ? `&status=${filter.status}` : '');
}

function runRow(r, now) {
  const start = ms(r.started_at);
  const end = ms(r.finished_at) || (r.status === 'running' ? now : 0);
  const link = `#/runs/${encodeURIComponent(r.run_id)}`;
  const threads = r.threads ? r.threads.length : 0;
  return h('tr', {class: 'run-row', dataset: {runId: r.run_id, status: r.status}},
    h('td', null, badge(r.status)),
    h('td', {class: 'mono'}, h('a', {href: link}, r.run_id)),
    h('td', {class: 'task'}, h('a', {href: link}, firstLine(r.task) || h('span', {class: 'muted'}, '(no task recorded)'))),
    h('td', {class: 'num'}, String(r.attempts || 0)),
    h('td', {class: 'num'}, threads ? String(threads) : '–'),
    h('td', {class: 'num'}, num(r.totals ? r.totals.input_tokens + r.totals.output_tokens : tokens(r.usage))),
    h('td', {class: 'num'}, start && end ? dur(end - start) : ''),
    h('td', {class: 'num'}, age(r.created_at, now)));
}

function submitForm(poller) {
  const msg = h('p', {class: 'form-msg', role: 'status'});
  const field = (label, el) => h('label', null, h('span', null, label), el);
  const task = h('textarea', {name: 'task', id: 'submit-task', rows: 6, required: true, placeholder: 'Plan a launch:\n- write the announcement\n- update the docs'});
  const model = h('input', {name: 'model', id: 'submit-model', placeholder: 'default (sim or the coordinator\'s --model)'});
  const agent = h('textarea', {name: 'agent', id: 'submit-agent', rows: 6, placeholder: 'name: researcher\nmodel: sim\ntools: [agent]'});
  const id = h('input', {name: 'id', id: 'submit-id', placeholder: 'optional; the same id is the same run'});
  const depth = h('input', {name: 'agent_max_depth', id: 'submit-depth', type: 'number', min: 0, placeholder: '4'});
  const threads = h('input', {name: 'agent_max_threads', id: 'submit-threads', type: 'number', min: 0, placeholder: '16'});
  const extra = h('textarea', {name: 'extra', id: 'submit-extra', rows: 2, placeholder: '{"budget": {...}} — more fields of the request, as JSON'});
  const form = h('form', {class: 'submit', id: 'submit-form', 'aria-label': 'Submit a run'},
    h('h2', null, 'Submit a run'),
    field('Task', task), field('Model', model), field('Agent spec (YAML or JSON)', agent),
    h('div', {class: 'row2'}, field('agent_max_depth', depth), field('agent_max_threads', threads)),
    field('Run id', id), field('Limits and budgets (JSON)', extra),
    h('button', {type: 'submit', id: 'submit-button'}, 'Submit'), msg);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = {task: task.value};
    if (model.value.trim()) body.model = model.value.trim();
    if (id.value.trim()) body.id = id.value.trim();
    if (agent.value.trim()) body.agent = agent.value;
    if (depth.value) body.agent_max_depth = Number(depth.value);
    if (threads.value) body.agent_max_threads = Number(threads.value);
    try {
      if (extra.value.trim()) Object.assign(body, JSON.parse(extra.value));
    } catch (e) {
      msg.textContent = `Limits and budgets: not JSON (${e.message})`;
      msg.className = 'form-msg error';
      return;
    }
    msg.textContent = 'Submitting…';
    msg.className = 'form-msg';
    try {
      const res = await api('POST', '/v1/runs', body);
      msg.textContent = '';
      poller.refresh();
      location.hash = `#/runs/${encodeURIComponent(res.run_id)}`;
    } catch (e) {
      msg.textContent = e.message;
      msg.className = 'form-msg error';
    }
  });
  return form;
}
