// Poller fetches one API path on a period while anything listens, and
// hands each answer to its listeners. Lists that have no event stream of
// their own (runs, approvals, workers) stay live this way.
import {api} from './api.js';

export class Poller {
  constructor(path, period) {
    this.path = path;
    this.period = period;
    this.subs = new Set();
    this.value = undefined;
    this.error = null;
    this.timer = null;
    this.inflight = false;
  }

  subscribe(fn) {
    this.subs.add(fn);
    if (this.value !== undefined || this.error) fn(this.value, this.error);
    if (this.subs.size === 1) this.tick();
    return () => {
      this.subs.delete(fn);
      if (this.subs.size === 0) {
        clearTimeout(this.timer);
        this.timer = null;
      }
    };
  }

  // refresh fetches now (after a change the page made itself).
  refresh() {
    clearTimeout(this.timer);
    return this.tick();
  }

  setPath(path) {
    if (path === this.path) return;
    this.path = path;
    this.value = undefined;
    this.refresh();
  }

  async tick() {
    if (this.inflight) return;
    this.inflight = true;
    try {
      this.value = await api('GET', this.path);
      this.error = null;
    } catch (e) {
      this.error = e;
    } finally {
      this.inflight = false;
    }
    for (const fn of this.subs) fn(this.value, this.error);
    if (this.subs.size > 0) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.tick(), this.period);
    }
  }
}

export const approvals = new Poller('/v1/approvals', 400);
export const workers = new Poller('/v1/workers', 1000);
export const failed = new Poller('/v1/runs?status=failed&limit=5', 3000);
