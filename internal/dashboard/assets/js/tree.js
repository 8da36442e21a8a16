// Tree is a run's tree of threads folded from its events (and corrected
// by its record once the run has finished): who spawned whom, where each
// thread runs and ran, its times, tokens, refused spawns and tool calls.
import {ms, tokens, finalStatus} from './util.js';

export class Tree {
  constructor(runId) {
    this.runId = runId;
    this.nodes = new Map();
    this.waiting = new Map(); // parent id → children seen before it
    this.root = null;
    this.status = '';
    this.error = '';
    this.startedAt = 0;
    this.finishedAt = 0;
    this.firstAt = 0;
    this.refusals = {depth: 0, threads: 0, budget: 0};
    this.version = 0; // bumped on every change
    this.events = 0;
  }

  node(id, e) {
    let n = this.nodes.get(id);
    if (!n) {
      n = {id, parentId: '', name: '', depth: 0, status: 'pending', placements: [], spawnedAt: 0, startedAt: 0,
        finishedAt: 0, own: 0, usage: {input_tokens: 0, output_tokens: 0}, children: [], refused: [],
        error: '', collapsed: undefined, path: '', agentCalls: [], approvals: 0, handoffs: []};
      this.nodes.set(id, n);
    }
    if (e) {
      if (e.parent_id && !n.parentId) n.parentId = e.parent_id;
      if (e.name && !n.name) n.name = e.name;
      if (e.depth != null && !n.depthSet) { n.depth = e.depth; n.depthSet = true; }
    }
    if (!n.linked) this.link(n);
    return n;
  }

  // link puts n under its parent (or makes it the root) once both are known.
  link(n) {
    if (n.parentId) {
      const p = this.nodes.get(n.parentId);
      if (!p) {
        if (!n.queued) {
          n.queued = true;
          if (!this.waiting.has(n.parentId)) this.waiting.set(n.parentId, []);
          this.waiting.get(n.parentId).push(n);
        }
        return;
      }
      p.children.push(n);
      n.seen = p.children.length;
      p.sorted = false;
      this.pairChild(p, n);
      n.linked = true;
      n.path = (p.path || p.name) + '/' + n.name;
    } else if (n.depth === 0 && n.depthSet) {
      this.root = n;
      n.linked = true;
      n.path = n.name;
    } else {
      return;
    }
    // children that arrived before their parent
    const early = this.waiting.get(n.id);
    if (early) {
      this.waiting.delete(n.id);
      for (const o of early) this.link(o);
      this.fixPaths(n);
    }
  }

  fixPaths(n) {
    for (const c of n.children) {
      c.path = n.path + '/' + c.name;
      this.fixPaths(c);
    }
  }

  apply(e) {
    this.events++;
    const t = ms(e.time);
    if (t && (!this.firstAt || t < this.firstAt)) this.firstAt = t;
    switch (e.type) {
      case 'run.started':
        this.status = 'running';
        this.startedAt = this.startedAt || t;
        break;
      case 'run.finished':
        this.status = e.status;
        this.error = e.reason || '';
        this.finishedAt = t;
        break;
      case 'thread.spawned': {
        const n = this.node(e.thread_id, e);
        n.spawnedAt = n.spawnedAt || t;
        break;
      }
      case 'thread.started': {
        const n = this.node(e.thread_id, e);
        if (!finalStatus(n.status)) n.status = 'running';
        n.startedAt = n.startedAt || t;
        if (!n.spawnedAt) n.spawnedAt = t;
        // Events are the placement history: drop what the record guessed.
        if (n.placements.some((pl) => pl.guess)) n.placements = [];
        if (e.worker) n.placements.push({worker: e.worker, at: t});
        break;
      }
      case 'thread.finished': {
        const n = this.node(e.thread_id, e);
        n.status = e.status || n.status;
        n.error = e.reason || '';
        n.finishedAt = t;
        break;
      }
      case 'thread.refused': {
        const p = this.node(e.parent_id);
        p.refused.push({name: e.name, reason: e.reason, at: t});
        const k = e.reason in this.refusals ? e.reason : 'budget';
        this.refusals[k]++;
        break;
      }
      case 'thread.replaced': {
        // placed again: the worker it left is named; the next
        // thread.started names the new one
        const n = this.node(e.thread_id, e);
        n.replaced = (n.replaced || 0) + 1;
        n.lastReplaceReason = e.reason || '';
        if (!finalStatus(n.status)) n.status = 'pending';
        break;
      }
      case 'thread.handoff':
        this.node(e.thread_id, e).handoffs.push(e.name || e.reason || '');
        break;
      case 'model.waiting': {
        // A model call waits (status waiting) for its endpoint's quota or,
        // the reason starting "retrying:", to retry a failed attempt; or it
        // goes on (running).
        const n = this.node(e.thread_id, e);
        const why = e.status === 'waiting' ? (e.reason || 'waiting for quota') : '';
        const retry = why.startsWith('retrying');
        n.quotaWait = retry ? '' : why;
        n.retryWait = retry ? why : '';
        break;
      }
      case 'model.call': {
        const n = this.node(e.thread_id, e);
        n.quotaWait = '';
        n.retryWait = '';
        if (e.usage) {
          n.usage.input_tokens += e.usage.input_tokens || 0;
          n.usage.output_tokens += e.usage.output_tokens || 0;
        }
        break;
      }
      case 'tool.call':
        if (e.tool === 'agent') {
          const p = this.node(e.thread_id, e);
          let args = {};
          try { args = JSON.parse(e.arguments || '{}'); } catch { /* a bad call spawns nothing */ }
          const m = /^call_(\d+)$/.exec(e.call_id || '');
          const call = {name: args.name, task: args.task, id: e.call_id || '', order: m ? Number(m[1]) : p.agentCalls.length + 1, child: null};
          p.agentCalls.push(call);
          this.pairCall(p, call);
        }
        break;
      case 'approval.requested':
        this.node(e.thread_id, e).approvals++;
        break;
      case 'approval.resolved': {
        const n = this.node(e.thread_id, e);
        n.approvals = Math.max(0, n.approvals - 1);
        break;
      }
      default:
        return;
    }
    this.version++;
  }

  // fromRecord makes the record the authority: every thread it lists with
  // the status, worker, usage and times it gives.
  fromRecord(rec) {
    if (!rec) return;
    this.status = rec.status || this.status;
    this.error = rec.error || this.error;
    this.startedAt = ms(rec.started_at) || this.startedAt;
    this.finishedAt = ms(rec.finished_at) || this.finishedAt;
    for (const th of rec.threads || []) {
      const n = this.node(th.id, {parent_id: th.parent_id, name: th.name, depth: th.depth});
      n.status = th.status;
      n.error = th.error || n.error;
      if (th.usage) n.usage = {input_tokens: th.usage.input_tokens || 0, output_tokens: th.usage.output_tokens || 0};
      if (th.worker) {
        const last = n.placements[n.placements.length - 1];
        if (!last || last.worker !== th.worker) n.placements.push({worker: th.worker, at: ms(th.started_at), guess: !n.placements.length});
      }
      n.startedAt = n.startedAt || ms(th.started_at);
      n.finishedAt = ms(th.finished_at) || n.finishedAt;
      if (!n.spawnedAt) n.spawnedAt = n.startedAt;
    }
    if (rec.refusals) {
      this.refusals.depth = Math.max(this.refusals.depth, rec.refusals.depth || 0);
      this.refusals.threads = Math.max(this.refusals.threads, rec.refusals.threads || 0);
    }
    this.version++;
  }

  // sums sets each node's subtree tokens; returns the deepest depth, the
  // live helpers, and the tree's tokens and cost in US dollars.
  sums() {
    let deepest = 0;
    let live = 0;
    let input = 0;
    let output = 0;
    let cost = 0;
    const walk = (n) => {
      let s = tokens(n.usage);
      input += (n.usage && n.usage.input_tokens) || 0;
      output += (n.usage && n.usage.output_tokens) || 0;
      cost += (n.usage && n.usage.cost_usd) || 0;
      if (n.depth > deepest) deepest = n.depth;
      if (n.depth > 0 && !finalStatus(n.status)) live++;
      for (const c of n.children) s += walk(c);
      n.subtree = s;
      return s;
    };
    let total = 0;
    for (const n of this.tops()) total += walk(n);
    return {deepest, live, total, input, output, cost};
  }

  // tops are the nodes without a known parent: the root, and orphans whose
  // parent's events are gone.
  tops() {
    const out = [];
    if (this.root) out.push(this.root);
    for (const n of this.nodes.values()) if (!n.linked) out.push(n);
    return out;
  }

  // workers lists the distinct workers the tree's threads ran on.
  workers() {
    const s = new Set();
    for (const n of this.nodes.values()) for (const p of n.placements) s.add(p.worker);
    return [...s];
  }

  // pairChild and pairCall pair a parent's helpers with its agent calls as
  // either arrives: the i-th helper named X answers the i-th call naming X.
  // That gives each helper its task and its place among its siblings (call
  // order). Both are O(1) per helper, for trees of any width.
  pairChild(p, c) {
    const calls = p.openCalls && p.openCalls.get(c.name);
    if (calls && calls.length) return this.pair(p, calls.shift(), c);
    p.openKids ??= new Map();
    if (!p.openKids.has(c.name)) p.openKids.set(c.name, []);
    p.openKids.get(c.name).push(c);
  }

  pairCall(p, call) {
    const kids = p.openKids && p.openKids.get(call.name);
    if (kids && kids.length) return this.pair(p, call, kids.shift());
    p.openCalls ??= new Map();
    if (!p.openCalls.has(call.name)) p.openCalls.set(call.name, []);
    p.openCalls.get(call.name).push(call);
  }

  pair(p, call, c) {
    call.child = c;
    c.call = call;
    p.sorted = false;
  }

  // ordered returns n's helpers in call order (those without a known call
  // last, as they were spawned).
  ordered(n) {
    if (!n.sorted) {
      const key = (c) => (c.call ? c.call.order : Infinity);
      n.children.sort((a, b) => key(a) - key(b) || a.seen - b.seen);
      n.sorted = true;
    }
    return n.children;
  }

  // taskOf is the task a helper was given, from its parent's agent call.
  taskOf(n) {
    return n.call ? n.call.task || '' : '';
  }
}
