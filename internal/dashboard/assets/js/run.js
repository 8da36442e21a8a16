// Run: the live tree of every thread, its limits, its waterfall, output,
// and the buttons that act on it.
import {h, fill, badge, dur, ms, tokens, num, folded, finalStatus, age} from './util.js';
import {api, features} from './api.js';
import {EventStream} from './sse.js';
import {Tree} from './tree.js';

const ROW = 26; // px per tree row (app.css .trow)
const ALL_ROWS = 400; // up to this many rows are all in the DOM; beyond, only those in view
const BIG_TREE = 400; // trees larger than this start with subtrees below depth 1 folded
const DEFAULTS = {agent_max_depth: 4, agent_max_threads: 16};

export function runView(root, runId) {
  const tree = new Tree(runId);
  let rec = null;
  let feats = new Set();
  let streamState = 'connecting';
  let stateSince = Date.now();
  let staleMs = 0;
  let reconciled = false;
  let rendered = -1;
  let firstRenderAt = 0;
  const openedAt = performance.now();

  const state = h('span', {id: 'stream-state', class: 'stream-state', dataset: {state: 'connecting'}, 'aria-live': 'polite'}, 'connecting');
  const title = h('h1', {class: 'run-title'}, h('span', {class: 'muted'}, 'Run '), h('span', {class: 'mono'}, runId));
  const status = h('span', {id: 'run-status'});
  const buttons = h('span', {class: 'run-actions'});
  const meta = h('div', {class: 'run-meta', id: 'run-meta'});
  const limits = h('div', {class: 'limits', id: 'limits'});
  const result = h('div', {class: 'run-result', id: 'run-result'});
  const axis = h('div', {class: 'taxis'});
  const space = h('div', {class: 'tree-space'});
  const rows = h('div', {class: 'tree-rows'});
  const scroller = h('div', {class: 'tree-scroll', id: 'tree'}, space, rows);
  const head = h('div', {class: 'trow thead'},
    ['Thread', 'Status', 'Worker', 'Depth', 'Elapsed', 'Tokens', 'Subtree', ''].map((c) => h('span', null, c)), axis);
  const msg = h('p', {class: 'form-msg', role: 'status'});

  fill(root,
    h('div', {class: 'run-head'}, title, status, h('span', {class: 'spacer'}), state, buttons),
    msg, meta, limits,
    h('section', {class: 'tree-box'}, head, scroller),
    result);

  // --- acting on the run
  const act = async (what, path) => {
    msg.textContent = `${what}…`;
    msg.className = 'form-msg';
    try {
      await api('POST', path);
      msg.textContent = `${what}: asked.`;
      loadRecord();
    } catch (e) {
      msg.textContent = `${what}: ${e.message}`;
      msg.className = 'form-msg error';
    }
  };

  const cancelBtn = h('button', {type: 'button', id: 'cancel-run', class: 'danger', onclick: () => act('Cancel', `/v1/runs/${encodeURIComponent(runId)}/cancel`)}, 'Cancel run');
  const resumeBtn = h('button', {type: 'button', id: 'resume-run', onclick: () => act('Resume', `/v1/runs/${encodeURIComponent(runId)}/resume`)}, 'Resume');
  const traceLink = h('a', {class: 'button', id: 'trace-link', target: '_blank', rel: 'noopener'}, 'Trace');

  const renderHead = () => {
    const st = rec ? rec.status : tree.status || 'running';
    const shownStatus = finalStatus(tree.status) ? tree.status : st;
    fill(status, badge(shownStatus));
    status.dataset.status = shownStatus;
    const btns = [];
    if (!finalStatus(shownStatus)) btns.push(cancelBtn);
    if (feats.has('POST /v1/runs/{id}/resume') && finalStatus(shownStatus) && shownStatus !== 'succeeded') btns.push(resumeBtn);
    if (rec && rec.trace_url) {
      if (traceLink.getAttribute('href') !== rec.trace_url) traceLink.setAttribute('href', rec.trace_url);
      btns.push(traceLink);
    }
    // The same nodes stay in place from one render to the next, so a click
    // that lands while the page re-renders still reaches its button.
    const kids = [...buttons.children];
    if (kids.length !== btns.length || kids.some((k, i) => k !== btns[i])) fill(buttons, btns);
    if (!rec) return;
    const now = Date.now();
    const start = ms(rec.started_at);
    const end = ms(rec.finished_at) || (finalStatus(shownStatus) ? tree.finishedAt : now);
    const item = (k, v) => v === '' || v == null ? null : h('div', null, h('dt', null, k), h('dd', null, v));
    fill(meta, h('dl', null,
      item('Attempts', String(rec.attempts || 0)),
      item('Coordinator', rec.coordinator || ''),
      item('Model', rec.model || ''),
      item('Created', rec.created_at ? age(rec.created_at, now) : ''),
      item('Duration', start && end ? dur(end - start) : ''),
      item('Tokens', num(tokens(rec.usage) || tree.sums().total)),
      item('Cached input', cachedInput(rec)),
      item('Cost', cost(rec)),
      item('Workers', tree.workers().join(', '))),
    h('div', {class: 'task-box'}, h('h3', null, 'Task'), folded(rec.task || '')));
    const outs = [];
    if (rec.error) outs.push(h('div', {class: 'error-box', id: 'run-error'}, h('h3', null, 'Error'), folded(rec.error)));
    if (rec.output) outs.push(h('div', {class: 'output-box', id: 'run-output'}, h('h3', null, 'Output'), folded(rec.output, 4000)));
    fill(result, outs);
  };

  const renderLimits = (s) => {
    const lim = {...DEFAULTS, ...(rec && rec.limits ? rec.limits : {}), ...(rec || {})};
    const maxThreads = lim.agent_max_threads || DEFAULTS.agent_max_threads;
    const maxDepth = lim.agent_max_depth || DEFAULTS.agent_max_depth;
    const meter = (label, used, max, id, show = String) => h('div', {class: 'meter', id},
      h('span', {class: 'label'}, label), h('span', {class: 'val'}, `${show(used)} / ${show(max)}`),
      h('span', {class: 'bar'}, h('span', {class: used >= max ? 'fill full' : 'fill', style: `width:${Math.min(100, max ? (used / max) * 100 : 0)}%`})));
    const parts = [
      meter('Live helpers', s.live, maxThreads, 'limit-threads'),
      meter('Deepest', s.deepest, maxDepth, 'limit-depth'),
      h('div', {class: 'meter'}, h('span', {class: 'label'}, 'Refused'),
        h('span', {class: 'val', id: 'refusals'}, `depth ${tree.refusals.depth} · threads ${tree.refusals.threads}` + (tree.refusals.budget ? ` · budget ${tree.refusals.budget}` : ''))),
      h('div', {class: 'meter'}, h('span', {class: 'label'}, 'Threads'), h('span', {class: 'val', id: 'thread-count'}, String(tree.nodes.size))),
    ];
    const t = threadTotals();
    parts.push(h('div', {class: 'meter'}, h('span', {class: 'label'}, 'Totals'),
      h('span', {class: 'val', id: 'thread-totals', dataset: Object.fromEntries(Object.entries(t).map(([k, v]) => [k, String(v)]))},
        `${t.done} done · ${t.running} running · ${t.failed} failed · ${t.cancelled} cancelled · ${t.refused} refused` +
        (t.waiting ? ` · ${t.waiting} waiting` : ''))));
    for (const [kind, used, limit] of budgetUse(s)) {
      parts.push(meter(`Budget ${kind}`, used, limit, `budget-${kind}`, kind === 'duration' ? dur : kind === 'usd' ? dollars : String));
    }
    fill(limits, parts);
  };

  // dollars shows a budget's US dollars with cents, or finer where cents
  // would hide it: $1.02, $0.0123.
  const dollars = (usd) => {
    const v = Number(usd) || 0;
    return '$' + (v === 0 || Math.abs(v) >= 0.995 ? v.toFixed(2) : v.toFixed(4));
  };

  // cost is the run's cost in US dollars as the record says it (the run's
  // own once it has ended, else its totals so far), '' when some model of
  // it has no price.
  const cost = (r) => {
    const usd = typeof r.cost_usd === 'number' ? r.cost_usd : (r.totals && typeof r.totals.cost_usd === 'number' ? r.totals.cost_usd : null);
    return usd == null ? '' : '$' + usd.toFixed(4);
  };

  // cachedInput is the input tokens read from (and written to) the
  // providers' prompt caches, '' when none were.
  const cachedInput = (r) => {
    const u = r.usage && (r.usage.input_tokens || r.usage.output_tokens) ? r.usage : (r.totals || {});
    const read = u.cache_read_tokens || 0, write = u.cache_write_tokens || 0;
    if (!read && !write) return '';
    return num(read) + ' read' + (write ? ` · ${num(write)} written` : '');
  };

  // threadTotals counts the threads as the record's totals do (record.Run.Sum):
  // the record's own once the run has ended, else the live tree's.
  const threadTotals = () => {
    if (rec && rec.totals && finalStatus(rec.status)) {
      const {done, running, waiting, failed, cancelled, refused} = rec.totals;
      return {done, running, waiting, failed, cancelled, refused};
    }
    const t = {done: 0, running: 0, waiting: 0, failed: 0, cancelled: 0,
      refused: tree.refusals.depth + tree.refusals.threads + (tree.refusals.budget || 0)};
    for (const n of tree.nodes.values()) {
      if (n.status === 'succeeded') t.done++;
      else if (n.status === 'failed' || n.status === 'cancelled' || n.status === 'waiting') t[n.status]++;
      else t.running++;
    }
    return t;
  };

  // budgetUse lists [kind, used, limit] for each bounded kind of the run's
  // budget (durations in milliseconds, usd in US dollars): the record's own account once it
  // has one (budget: {kind: {used, limit}}), else the limits it was
  // submitted with against what the tree shows so far.
  const budgetUse = (s) => {
    if (!rec) return [];
    if (rec.budget && typeof rec.budget === 'object') {
      return Object.entries(rec.budget).filter(([, a]) => a && typeof a === 'object').map(([k, a]) => [k, a.used, a.limit]);
    }
    const now = Date.now();
    const started = tree.startedAt || ms(rec.started_at);
    const live = {tokens: s.total, input_tokens: s.input, output_tokens: s.output,
      usd: s.cost || 0, spawns: Math.max(0, tree.nodes.size - 1), duration: started ? Math.max(0, (tree.finishedAt || now) - started) : 0};
    return Object.entries(rec.submitted_budget || {}).filter(([k, v]) => v > 0 && k in live)
      .map(([k, v]) => [k, live[k], k === 'duration' ? Math.round(v / 1e6) : v]);
  };

  // --- the tree
  const big = () => tree.nodes.size > BIG_TREE;
  const isCollapsed = (n) => n.collapsed ?? (big() && n.depth >= 2 && n.children.length > 0);
  const flatten = () => {
    const out = [];
    const stack = tree.tops().reverse().map((n) => ({n}));
    while (stack.length) {
      const it = stack.pop();
      out.push(it);
      if (it.r) continue;
      const n = it.n;
      if (isCollapsed(n)) continue;
      for (let i = n.refused.length - 1; i >= 0; i--) stack.push({r: n.refused[i], n, depth: n.depth + 1});
      const kids = tree.ordered(n);
      for (let i = kids.length - 1; i >= 0; i--) stack.push({n: kids[i]});
    }
    return out;
  };

  let flat = [];
  let span = {t0: 0, t1: 1};
  const renderRows = () => {
    const total = flat.length;
    let start = 0;
    let end = total;
    if (total > ALL_ROWS) {
      const top = scroller.scrollTop;
      const height = scroller.clientHeight || 600;
      start = Math.max(0, Math.floor(top / ROW) - 20);
      end = Math.min(total, Math.ceil((top + height) / ROW) + 20);
    }
    space.style.height = `${total * ROW}px`;
    rows.style.transform = `translateY(${start * ROW}px)`;
    const now = Date.now();
    const els = [];
    for (let i = start; i < end; i++) {
      const el = flat[i].r ? refusedRow(flat[i]) : threadRow(flat[i].n, now);
      el.dataset.row = String(i);
      els.push(el);
    }
    rows.replaceChildren(...els);
    scroller.dataset.rows = String(total);
  };

  const threadRow = (n, now) => {
    const end = n.finishedAt || (finalStatus(n.status) ? 0 : now);
    const kids = n.children.length + n.refused.length;
    const collapsed = isCollapsed(n);
    const place = n.placements;
    const worker = place.length ? place[place.length - 1].worker : '';
    const workerCell = place.length > 1
      ? h('span', {class: 'replaced', title: `placed ${place.length} times${n.lastReplaceReason ? ': ' + n.lastReplaceReason : ''}`}, place.map((p) => p.worker).join(' → '))
      : n.replaced ? h('span', {class: 'replaced', title: n.lastReplaceReason}, `${worker} → …`) : worker;
    return h('div', {class: `trow s-${n.status}`, role: 'row',
      dataset: {threadId: n.id, threadPath: n.path || n.name, status: n.status, worker, placements: String(place.length), depth: String(n.depth)}},
    h('span', {class: 'tname', style: `padding-left:${n.depth * 16}px`},
      kids ? h('button', {type: 'button', class: 'toggle', dataset: {toggle: n.id}, 'aria-expanded': String(!collapsed),
        'aria-label': `${collapsed ? 'Expand' : 'Collapse'} ${n.name}`}, collapsed ? '▸' : '▾') : h('span', {class: 'toggle-space'}),
      h('a', {href: `#/runs/${encodeURIComponent(runId)}/threads/${encodeURIComponent(n.id)}`}, n.name || n.id.slice(0, 8)),
      collapsed && kids ? h('span', {class: 'muted'}, ` (${kids} below)`) : null,
      n.approvals ? h('span', {class: 'chip warn'}, 'waiting for approval') : null,
      n.quotaWait && !finalStatus(n.status) ? h('span', {class: 'chip warn', title: n.quotaWait, dataset: {quotaWait: n.quotaWait}}, 'waiting for quota') : null,
      n.retryWait && !finalStatus(n.status) ? h('span', {class: 'chip warn', title: n.retryWait, dataset: {modelRetry: n.retryWait}}, n.retryWait) : null),
    h('span', null, badge(n.status)),
    h('span', {class: 'mono worker'}, workerCell),
    h('span', {class: 'num'}, String(n.depth)),
    h('span', {class: 'num'}, n.startedAt && end ? dur(end - n.startedAt) : ''),
    h('span', {class: 'num'}, num(tokens(n.usage))),
    h('span', {class: 'num'}, num(n.subtree || 0)),
    h('span', {class: 'cancel-cell'}, feats.has('POST /v1/runs/{id}/threads/{thread}/cancel') && !finalStatus(n.status) && n.depth > 0
      ? h('button', {type: 'button', class: 'mini', dataset: {cancelThread: n.id}, 'aria-label': `Cancel ${n.name}`}, '✕') : null),
    waterfall(n, now));
  };

  const refusedRow = (it) => h('div', {class: 'trow refused', dataset: {refused: it.r.reason, parentId: it.n.id}},
    h('span', {class: 'tname', style: `padding-left:${it.depth * 16}px`}, h('span', {class: 'toggle-space'}),
      h('span', null, `⊘ ${it.r.name || 'spawn'}`)),
    h('span', null, badge('refused')),
    h('span', {class: 'reason'}, it.r.reason === 'depth' ? 'depth limit' : it.r.reason === 'threads' ? 'thread limit' : it.r.reason),
    h('span'), h('span'), h('span'), h('span'), h('span'), h('span'));

  const waterfall = (n, now) => {
    const {t0, t1} = span;
    const w = t1 - t0 || 1;
    const pct = (t) => `${Math.max(0, Math.min(100, ((t - t0) / w) * 100)).toFixed(2)}%`;
    const spawned = n.spawnedAt || n.startedAt;
    if (!spawned) return h('span', {class: 'wf'});
    const started = n.startedAt || now;
    const end = n.finishedAt || (finalStatus(n.status) ? started : now);
    const bar = (cls, a, b, title) => h('span', {class: cls, title,
      style: `left:${pct(a)};width:calc(${pct(b)} - ${pct(a)})`});
    return h('span', {class: 'wf'},
      started > spawned ? bar('wait', spawned, started, `waiting for a worker ${dur(started - spawned)}`) : null,
      n.startedAt ? bar(`busy s-${n.status}`, n.startedAt, end, `running ${dur(end - n.startedAt)}`) : null);
  };

  scroller.addEventListener('click', (ev) => {
    const t = ev.target.closest('[data-toggle]');
    if (t) {
      const n = tree.nodes.get(t.dataset.toggle);
      if (n) n.collapsed = !isCollapsed(n);
      rendered = -1;
      schedule();
      return;
    }
    const c = ev.target.closest('[data-cancel-thread]');
    if (c) act('Cancel subtree', `/v1/runs/${encodeURIComponent(runId)}/threads/${encodeURIComponent(c.dataset.cancelThread)}/cancel`);
  });
  scroller.addEventListener('scroll', () => { if (flat.length > ALL_ROWS) requestAnimationFrame(renderRows); }, {passive: true});

  // render at most once a frame, and only when something changed (or the
  // clock moved, for a live run's bars and elapsed times).
  let pending = false;
  const schedule = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      render();
    });
  };
  const render = () => {
    const live = !finalStatus(tree.status) && !(rec && finalStatus(rec.status));
    const now = Date.now();
    if (rendered !== tree.version) {
      flat = flatten();
      rendered = tree.version;
    }
    const s = tree.sums();
    const t0 = tree.firstAt || tree.startedAt || (rec && ms(rec.started_at)) || now;
    let t1 = tree.finishedAt || (rec && ms(rec.finished_at)) || 0;
    if (!t1 || live) t1 = Math.max(now, t1);
    span = {t0, t1};
    fill(axis, h('span', null, '0'), h('span', null, dur(t1 - t0)));
    renderRows();
    renderLimits(s);
    renderHead();
    if (!firstRenderAt && tree.nodes.size > 0) {
      firstRenderAt = performance.now();
      scroller.dataset.firstRenderMs = String(Math.round(firstRenderAt - openedAt));
    }
    scroller.dataset.threads = String(tree.nodes.size);
    scroller.dataset.events = String(tree.events);
    scroller.dataset.final = String(reconciled);
    if (reconciled && !scroller.dataset.finalMs) scroller.dataset.finalMs = String(Math.round(performance.now() - openedAt));
  };

  // --- data
  let retries = 0;
  const loadRecord = async () => {
    try {
      rec = await api('GET', `/v1/runs/${encodeURIComponent(runId)}`);
      if (finalStatus(rec.status) && tree.nodes.size === 0) {
        // A finished run: show its tree at once; its events add the times
        // and the placement history as they come.
        tree.fromRecord(rec);
      }
      if (finalStatus(rec.status) && (stream.state === 'ended' || stream.state === 'error' || tree.status === rec.status)) {
        tree.fromRecord(rec);
        reconciled = true;
      } else if (finalStatus(tree.status) && !finalStatus(rec.status) && retries++ < 50) {
        // run.finished came before the final record was stored
        setTimeout(loadRecord, 200);
      }
      schedule();
    } catch (e) {
      msg.textContent = e.status === 404 ? `No run ${runId}.` : `Cannot read the run: ${e.message}`;
      msg.className = 'form-msg error';
    }
  };
  const setState = (st, detail) => {
    streamState = st;
    stateSince = Date.now();
    staleMs = st === 'stale' ? detail : 0;
    showState();
    if (st === 'ended' && !scroller.dataset.endedMs) scroller.dataset.endedMs = String(Math.round(performance.now() - openedAt));
    if (st === 'ended' || st === 'error') loadRecord();
  };
  const showState = () => {
    const text = {
      connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…',
      stale: `stale since ${Math.round(staleMs / 1000)}s`, ended: 'finished', error: 'no event stream',
    }[streamState] || streamState;
    state.dataset.state = streamState;
    state.textContent = text;
  };
  const stream = new EventStream(`/v1/runs/${encodeURIComponent(runId)}/events`, {
    onEvent: (seq, e) => {
      tree.apply(e);
      if (e.type === 'run.finished') loadRecord();
      schedule();
    },
    onState: setState,
  });
  features().then((f) => { feats = f; schedule(); });
  loadRecord();
  stream.start();
  const clock = setInterval(() => {
    if (streamState === 'live' || streamState === 'stale' || streamState === 'reconnecting') schedule();
  }, 1000);
  return () => {
    stream.stop();
    clearInterval(clock);
  };
}
