// The dashboard: a router over the URL fragment and the views it shows.
import {h, fill, age} from './util.js';
import {loggedIn, logout} from './api.js';
import {approvals, failed} from './poll.js';
import {runsView} from './runs.js';
import {runView} from './run.js';
import {threadView} from './thread.js';
import {approvalsView} from './approvals.js';
import {workersView} from './workers.js';

const view = document.getElementById('view');
let current = null; // the shown view's cleanup

function route() {
  const path = (location.hash.replace(/^#/, '') || '/').split('?')[0];
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (current) current();
  current = null;
  view.replaceChildren();
  let nav = 'runs';
  if (parts[0] === 'runs' && parts[1] && parts[2] === 'threads' && parts[3]) {
    current = threadView(view, parts[1], parts[3]);
  } else if (parts[0] === 'runs' && parts[1]) {
    current = runView(view, parts[1]);
  } else if (parts[0] === 'approvals') {
    nav = 'approvals';
    current = approvalsView(view);
  } else if (parts[0] === 'workers') {
    nav = 'workers';
    current = workersView(view);
  } else {
    current = runsView(view);
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', a.dataset.nav === nav);
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// The "needs you" strip: approvals waiting for a person, runs that failed
// in the last hour.
function needsYou() {
  const strip = document.getElementById('needs-you');
  const count = document.getElementById('approvals-count');
  let pending = [];
  let recent = [];
  const render = () => {
    const now = Date.now();
    count.hidden = pending.length === 0;
    count.textContent = String(pending.length);
    const items = [];
    if (pending.length) {
      const oldest = pending.reduce((a, b) => (a.requested_at < b.requested_at ? a : b));
      items.push(h('a', {href: '#/approvals', class: 'need need-approvals', dataset: {need: 'approvals'}},
        h('strong', {class: 'n'}, String(pending.length)),
        pending.length === 1 ? ' approval waiting' : ' approvals waiting',
        h('span', {class: 'muted'}, ` · oldest ${age(oldest.requested_at, now)}`)));
    }
    const hourAgo = now - 3600e3;
    const fails = recent.filter((r) => Date.parse(r.finished_at || r.created_at) > hourAgo);
    if (fails.length) {
      items.push(h('span', {class: 'need need-failed', dataset: {need: 'failed'}}, `${fails.length} failed recently: `,
        fails.map((r) => h('a', {href: `#/runs/${encodeURIComponent(r.run_id)}`, class: 'run-link'}, r.run_id.slice(0, 12)))));
    }
    strip.hidden = items.length === 0;
    fill(strip, items);
  };
  approvals.subscribe((list) => { pending = list || []; render(); });
  failed.subscribe((list) => { recent = list || []; render(); });
  setInterval(render, 1000);
}

const out = document.getElementById('logout');
out.hidden = !loggedIn();
out.addEventListener('click', () => logout());
window.addEventListener('hashchange', route);
needsYou();
route();
