// placements follows the event streams of the running runs (at most
// maxRuns of them) while the Workers view is open, to tell which threads
// run on which worker.
import {Poller} from './poll.js';
import {EventStream} from './sse.js';
import {Tree} from './tree.js';

const maxRuns = 20;
const running = new Poller('/v1/runs?status=running&limit=20', 2000);

class Placements {
  constructor() {
    this.subs = new Set();
    this.streams = new Map(); // run id → {stream, tree}
    this.unsub = null;
  }

  subscribe(fn) {
    this.subs.add(fn);
    if (this.subs.size === 1) this.unsub = running.subscribe((runs) => this.follow(runs || []));
    return () => {
      this.subs.delete(fn);
      if (this.subs.size === 0) {
        this.unsub();
        for (const {stream} of this.streams.values()) stream.stop();
        this.streams.clear();
      }
    };
  }

  follow(runs) {
    const want = new Set(runs.slice(0, maxRuns).map((r) => r.run_id));
    for (const [id, s] of this.streams) {
      if (!want.has(id)) {
        s.stream.stop();
        this.streams.delete(id);
      }
    }
    for (const id of want) {
      if (this.streams.has(id)) continue;
      const tree = new Tree(id);
      const stream = new EventStream(`/v1/runs/${encodeURIComponent(id)}/events`, {
        onEvent: (seq, e) => { tree.apply(e); this.changed(); },
      });
      this.streams.set(id, {stream: stream.start(), tree});
    }
    this.changed();
  }

  changed() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      for (const fn of this.subs) fn();
    });
  }

  // byWorker maps each worker to the running threads last placed on it.
  byWorker() {
    const m = new Map();
    for (const [run, {tree}] of this.streams) {
      for (const n of tree.nodes.values()) {
        if (n.status !== 'running' || !n.placements.length) continue;
        const w = n.placements[n.placements.length - 1].worker;
        if (!m.has(w)) m.set(w, []);
        m.get(w).push({run, id: n.id, name: n.name});
      }
    }
    return m;
  }
}

export const placements = new Placements();
