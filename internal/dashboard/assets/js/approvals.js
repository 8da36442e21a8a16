// Approvals: tool calls waiting for a person, across all runs; Allow, Deny.
import {h, fill, age, dur, ms, prettyJSON} from './util.js';
import {api} from './api.js';
import {approvals} from './poll.js';

// approvalTimeout is the coordinator's default --approval-timeout; the
// "time left" column counts down from it.
const approvalTimeout = 10 * 60e3;

export function approvalsView(root) {
  const list = h('div', {class: 'approvals', id: 'approvals'});
  const note = h('p', {class: 'muted'});
  let items = [];
  const busy = new Set();
  const render = () => {
    const now = Date.now();
    note.textContent = items.length ? '' : 'Nothing waits for you.';
    fill(list, items.map((a) => approvalCard(a, now, busy, decide)));
  };
  const decide = async (a, decision) => {
    busy.add(a.id);
    render();
    try {
      await api('POST', `/v1/approvals/${encodeURIComponent(a.id)}`, {decision});
    } catch (e) {
      if (e.status !== 409) alert(`${decision}: ${e.message}`);
    } finally {
      busy.delete(a.id);
      approvals.refresh();
    }
  };
  const unsub = approvals.subscribe((v, err) => {
    if (err) { note.textContent = `Cannot list approvals: ${err.message}`; return; }
    items = v || [];
    render();
  });
  const tick = setInterval(render, 1000);
  fill(root, h('h1', null, 'Approvals'), note, list);
  return () => { unsub(); clearInterval(tick); };
}

export function approvalCard(a, now, busy, decide) {
  const left = ms(a.requested_at) + approvalTimeout - now;
  const waiting = busy.has(a.id);
  return h('article', {class: 'approval', dataset: {approvalId: a.id, runId: a.run_id, threadId: a.thread_id}},
    h('header', null,
      h('span', {class: 'tool'}, a.tool),
      h('span', {class: 'path mono'}, a.thread_path),
      h('a', {href: `#/runs/${encodeURIComponent(a.run_id)}`, class: 'mono'}, a.run_id),
      h('span', {class: 'spacer'}),
      h('span', {class: 'muted'}, `asked ${age(a.requested_at, now)}`),
      h('span', {class: 'muted left'}, left > 0 ? ` · denied in ${dur(left)} unless answered` : ' · timing out')),
    a.in_doubt ? h('p', {class: 'in-doubt'}, 'In doubt: this call was cut by a failure before its result and may or may not have taken effect. ' +
      'Allow runs it again; Deny tells the agent it is in doubt.') : null,
    h('pre', {class: 'args'}, prettyJSON(a.arguments)),
    h('div', {class: 'actions'},
      h('button', {type: 'button', class: 'allow', disabled: waiting, onclick: () => decide(a, 'allow')}, 'Allow'),
      h('button', {type: 'button', class: 'deny', disabled: waiting, onclick: () => decide(a, 'deny')}, 'Deny')));
}
