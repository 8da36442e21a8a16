// Thread: one thread's transcript. From the journal when the coordinator
// serves transcripts (GET /v1/runs/{id}/threads/{thread}); until then, and
// besides, the thread's own events: model turns, tool calls with their
// arguments, results, approvals, spawns linking to the helpers.
import {h, fill, badge, dur, ms, tokens, num, folded, prettyJSON} from './util.js';
import {api, features} from './api.js';
import {EventStream} from './sse.js';
import {Tree} from './tree.js';

export function threadView(root, runId, threadId) {
  const tree = new Tree(runId);
  const mine = [];
  let rec = null;
  let transcript = null;
  const head = h('div', {class: 'thread-head'});
  const info = h('div', {class: 'thread-info', id: 'thread-info'});
  const body = h('div', {class: 'transcript', id: 'transcript'});
  const journal = h('div', {class: 'journal', id: 'journal'});
  const state = h('span', {class: 'stream-state', id: 'stream-state', dataset: {state: 'connecting'}}, 'connecting');
  fill(root, h('p', null, h('a', {href: `#/runs/${encodeURIComponent(runId)}`}, `← run ${runId}`)), head, info, journal,
    h('h2', null, 'Events ', state), body);

  let pending = false;
  const schedule = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  };
  const render = () => {
    const n = tree.nodes.get(threadId);
    const name = n ? n.name : threadId;
    fill(head, h('h1', null, h('span', {class: 'muted'}, 'Thread '), name, ' ', n ? badge(n.status) : null));
    head.dataset.threadId = threadId;
    head.dataset.status = n ? n.status : '';
    let task = '';
    if (n && n.depth === 0) task = rec ? rec.task || '' : '';
    else if (n) task = tree.taskOf(n);
    const item = (k, v) => v === '' || v == null ? null : h('div', null, h('dt', null, k), h('dd', null, v));
    fill(info,
      h('dl', null,
        item('Path', n ? n.path : ''),
        item('Depth', n ? String(n.depth) : ''),
        item('Worker', n ? n.placements.map((p) => p.worker).join(' → ') : ''),
        item('Elapsed', n && n.startedAt ? dur((n.finishedAt || Date.now()) - n.startedAt) : ''),
        item('Tokens', n ? num(tokens(n.usage)) : ''),
        item('Parent', n && n.parentId ? h('a', {href: `#/runs/${encodeURIComponent(runId)}/threads/${encodeURIComponent(n.parentId)}`}, tree.nodes.get(n.parentId)?.name || n.parentId) : ''),
        n && n.error ? item('Error', n.error) : null),
      h('div', {class: 'task-box', id: 'thread-task'}, h('h3', null, 'Task'), folded(task)));
    fill(body, mine.map((e) => entry(e, tree, runId)));
  };

  const stream = new EventStream(`/v1/runs/${encodeURIComponent(runId)}/events`, {
    onEvent: (seq, e) => {
      tree.apply(e);
      if (e.thread_id === threadId || (e.type === 'thread.refused' && e.parent_id === threadId) ||
          (e.type === 'thread.spawned' && e.parent_id === threadId)) mine.push(e);
      schedule();
    },
    onState: (st) => {
      state.dataset.state = st;
      state.textContent = st === 'ended' ? 'all' : st;
    },
  });
  api('GET', `/v1/runs/${encodeURIComponent(runId)}`).then((r) => { rec = r; schedule(); }).catch(() => {});
  features().then(async (f) => {
    if (!f.has('GET /v1/runs/{id}/threads/{thread}')) return;
    try {
      transcript = await api('GET', `/v1/runs/${encodeURIComponent(runId)}/threads/${encodeURIComponent(threadId)}`);
      fill(journal, h('h2', null, 'Transcript'), renderTranscript(transcript, runId));
    } catch (e) {
      fill(journal, h('p', {class: 'muted'}, `No transcript: ${e.message}`));
    }
  });
  stream.start();
  return () => stream.stop();
}

function entry(e, tree, runId) {
  const when = h('span', {class: 'when muted'}, new Date(ms(e.time)).toLocaleTimeString());
  const row = (cls, ...kids) => h('div', {class: `entry ${cls}`, dataset: {type: e.type}}, when, ...kids);
  switch (e.type) {
    case 'thread.started':
      return row('sys', `started on ${e.worker || '?'}`);
    case 'thread.replaced':
      return row('sys', `placed again: left ${e.worker || '?'}`, e.reason ? ` (${e.reason})` : '');
    case 'thread.finished':
      return row('sys', 'finished ', badge(e.status), e.reason ? ` ${e.reason}` : '');
    case 'model.call':
      return row('model', h('strong', null, 'model '), e.model || '', ` · ${num(tokens(e.usage))} tokens (${e.usage?.input_tokens || 0} in, ${e.usage?.output_tokens || 0} out)`,
        e.latency_ms ? ` · ${dur(e.latency_ms)}` : '');
    case 'tool.call':
      return row('tool-call', h('strong', null, `→ ${e.tool}`), h('span', {class: 'muted'}, ` ${e.call_id || ''}`),
        h('pre', {class: 'args', dataset: {callId: e.call_id || ''}}, prettyJSON(e.arguments)));
    case 'tool.result':
      return row('tool-result', h('strong', null, `← ${e.tool}`), h('span', {class: 'muted'}, ` ${e.call_id || ''}`),
        e.in_doubt ? h('span', {class: 'in-doubt'}, ' in doubt') : null, folded(e.output || ''));
    case 'approval.requested':
      return row('approval', h('strong', null, 'approval asked '), e.tool || '', h('pre', {class: 'args'}, prettyJSON(e.arguments)));
    case 'approval.resolved':
      return row('approval', h('strong', null, 'approval '), e.decision || '', e.reason ? ` (${e.reason})` : '');
    case 'thread.spawned':
      return row('spawn', 'spawned ', h('a', {href: `#/runs/${encodeURIComponent(runId)}/threads/${encodeURIComponent(e.thread_id)}`}, e.name || e.thread_id));
    case 'thread.refused':
      return row('refused', `refused spawn ${e.name || ''}: ${e.reason}`);
    case 'thread.handoff':
      return row('sys', `handed off to ${e.name || ''} ${e.reason || ''}`);
    default:
      return row('sys', e.type);
  }
}

// renderTranscript shows a journal transcript (GET /v1/runs/{id}/threads/
// {thread}): its entries in the order they were written — instructions
// and task, every model turn with its text, tool calls and usage, tool
// results, approvals, spawns linking to the helper, handoffs, elisions
// and summaries of the conversation, the end.
// Kinds it does not know are shown as they are; long contents are folded.
function renderTranscript(t, runId) {
  const link = (id, text) => h('a', {href: `#/runs/${encodeURIComponent(runId)}/threads/${encodeURIComponent(id)}`}, text);
  const when = (en) => h('span', {class: 'when muted'}, en.time ? new Date(ms(en.time)).toLocaleTimeString() : '');
  const out = [h('dl', {class: 'transcript-head'},
    ...[['Model', t.model], ['Status', t.status], ['Worker', t.worker], ['Attempts', t.attempts], ['Tokens', t.usage ? num(tokens(t.usage)) : '']]
      .filter(([, v]) => v !== undefined && v !== '' && v !== 0)
      .map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, String(v)))))];
  for (const en of t.entries || []) {
    const kind = en.kind || en.type || 'entry';
    const row = (...kids) => h('div', {class: `entry j-${kind}`, dataset: {kind}}, when(en), ...kids);
    switch (kind) {
      case 'start':
        if (en.system) out.push(row(h('strong', null, 'instructions'), folded(en.system)));
        out.push(row(h('strong', null, 'task'), h('div', {class: 'task-text'}, folded(en.task || ''))));
        break;
      case 'model': {
        const m = en.message || {};
        out.push(row(h('strong', null, `turn ${en.turn ?? ''}`), ` ${en.model || ''} · ${num(tokens(en.usage))} tokens`,
          en.latency_ms ? ` · ${dur(en.latency_ms)}` : '',
          m.content ? folded(m.content) : null,
          (m.tool_calls || []).map((c) => h('div', {class: 'tool-call'}, h('strong', null, `→ ${c.name}`), h('span', {class: 'muted'}, ` ${c.id}`),
            h('pre', {class: 'args', dataset: {callId: c.id}}, prettyJSON(c.arguments))))));
        break;
      }
      case 'tool':
        out.push(row(h('strong', null, `← ${en.tool || ''}`), h('span', {class: 'muted'}, ` ${en.call_id || ''} ${en.tool_status || ''}`),
          en.duration_ms ? ` · ${dur(en.duration_ms)}` : '', h('div', {class: 'tool-result'}, folded(en.result || ''))));
        break;
      case 'approval':
        out.push(row(h('strong', null, 'approval '), `${en.tool || ''}: ${en.allow ? 'allowed' : 'denied'}`, en.reason ? ` (${en.reason})` : ''));
        break;
      case 'spawn':
        out.push(row(h('strong', null, 'spawned '), en.child_id ? link(en.child_id, en.name || en.child_id) : (en.name || '')));
        break;
      case 'refusal':
        out.push(row(h('strong', null, 'refused '), `${en.name || ''}: ${en.reason || ''}`));
        break;
      case 'elision': {
        const els = en.elided || [];
        const bytes = els.reduce((n, el) => n + (el.bytes || 0), 0);
        out.push(row(h('strong', null, 'elided '), `${els.length} old tool results (${num(bytes)} bytes) to fit the context window: ` +
          `about ${num(en.tokens_before || 0)} → ${num(en.tokens_after || 0)} of ${num(en.context_window || 0)} tokens`,
          h('div', {class: 'muted'}, els.map((el) => `${el.tool} ${el.call_id} (${num(el.bytes || 0)} bytes)`).join(', '))));
        break;
      }
      case 'summary':
        out.push(row(h('strong', null, 'summary '), `of ${en.summarized || 0} earlier messages to fit the context window: ` +
          `about ${num(en.tokens_before || 0)} → ${num(en.tokens_after || 0)} of ${num(en.context_window || 0)} tokens · ${num(tokens(en.usage))} tokens`,
          h('div', {class: 'task-text'}, folded(en.content || ''))));
        break;
      case 'end':
        out.push(row(h('strong', null, 'end '), en.status || t.status || '', en.reason ? ` ${en.reason}` : '',
          t.output ? folded(t.output) : null, t.error ? h('div', {class: 'error'}, t.error) : null));
        break;
      default: {
        const rest = {...en};
        delete rest.kind;
        delete rest.time;
        out.push(row(h('strong', null, kind), folded(JSON.stringify(rest, null, 2), 1200)));
      }
    }
  }
  return out;
}
