// Workers: the live fleet and the threads placed on each worker.
import {h, fill, age, badge} from './util.js';
import {workers} from './poll.js';
import {placements} from './placements.js';

export function workersView(root) {
  const body = h('tbody');
  const note = h('p', {class: 'muted'});
  let list = [];
  const render = () => {
    const now = Date.now();
    note.textContent = list.length ? '' : 'No live workers.';
    const byWorker = placements.byWorker();
    fill(body, list.map((w) => {
      const threads = byWorker.get(w.id) || [];
      return h('tr', {class: 'worker-row', dataset: {workerId: w.id, draining: w.draining ? 'true' : 'false'}},
        h('td', {class: 'mono'}, w.id),
        h('td', null, w.host || ''),
        h('td', {class: 'num'}, String(w.slots)),
        h('td', {class: 'num'}, String(w.running)),
        h('td', {class: 'num'}, String(w.parked)),
        h('td', {class: 'num'}, String(w.placed ?? '')),
        h('td', null, w.draining ? badge('draining') : 'no'),
        h('td', null, sandbox(w.sandbox)),
        h('td', {class: 'num'}, age(w.last_seen, now)),
        h('td', {class: 'placed'}, threads.length ? threads.slice(0, 20).map((t) =>
          h('a', {href: `#/runs/${encodeURIComponent(t.run)}/threads/${encodeURIComponent(t.id)}`, class: 'chip', dataset: {threadId: t.id}}, t.name || t.id.slice(0, 8)))
          : h('span', {class: 'muted'}, '–'), threads.length > 20 ? ` +${threads.length - 20}` : ''));
    }));
  };
  const unsub = workers.subscribe((v, err) => {
    if (err) { note.textContent = `Cannot list workers: ${err.message}`; return; }
    list = v || [];
    const c = document.getElementById('workers-count');
    c.hidden = false;
    c.textContent = String(list.length);
    render();
  });
  const unplace = placements.subscribe(render);
  fill(root, h('h1', null, 'Workers'),
    h('table', {class: 'grid workers', id: 'workers'},
      h('thead', null, h('tr', null, ['Worker', 'Host', 'Slots', 'Running', 'Parked', 'Placed', 'Draining', 'Sandbox', 'Last seen', 'Threads on it'].map((c) => h('th', null, c)))),
      body), note);
  return () => { unsub(); unplace(); };
}

function sandbox(s) {
  if (s == null) return h('span', {class: 'muted'}, '–');
  if (typeof s === 'string') return s;
  if (typeof s === 'boolean') return s ? 'on' : 'off';
  return Object.entries(s).map(([k, v]) => `${k}: ${v}`).join(', ');
}
