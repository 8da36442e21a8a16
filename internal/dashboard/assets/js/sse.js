// EventStream follows a Server-Sent Events URL over fetch, so that it can
// see keep-alive comments (an EventSource cannot) and tell live from
// stale. It reconnects with Last-Event-ID after any break and drops events
// at or below the last id it delivered, so nothing is lost or repeated.
// A 204 answer (a finished run with nothing more) ends it for good; after
// a 503 it waits at least the answer's Retry-After before it tries again.

export class EventStream {
  // onEvent(seq, event) for each event; onState(state, detail) with state
  // 'connecting', 'live', 'reconnecting', 'stale' (detail: ms since the
  // last byte), 'ended' or 'error' (detail: message).
  constructor(url, {onEvent, onState, staleAfter = 20000}) {
    this.url = url;
    this.onEvent = onEvent;
    this.onState = onState || (() => {});
    this.staleAfter = staleAfter;
    this.last = 0;
    this.lastByte = 0;
    this.state = '';
    this.stopped = false;
    this.connects = 0;
  }

  start() {
    this.loop();
    this.timer = setInterval(() => this.check(), 1000);
    return this;
  }

  stop() {
    this.stopped = true;
    clearInterval(this.timer);
    if (this.ctrl) this.ctrl.abort();
  }

  set(state, detail) {
    if (state === this.state && state !== 'stale') return;
    this.state = state;
    this.onState(state, detail);
  }

  check() {
    if (this.state !== 'live' && this.state !== 'stale') return;
    const since = Date.now() - this.lastByte;
    if (since > this.staleAfter) {
      this.set('stale', since);
      // Two keep-alives missed: the connection is dead even if no error says so.
      if (since > 2 * this.staleAfter && this.ctrl) this.ctrl.abort();
    }
  }

  async loop() {
    let backoff = 250;
    while (!this.stopped) {
      this.set(this.connects === 0 ? 'connecting' : 'reconnecting');
      this.connects++;
      let finished = false;
      let wait = 0;
      try {
        finished = await this.once();
        backoff = 250;
      } catch (err) {
        if (this.stopped) return;
        if (err && err.fatal) {
          this.set('error', err.message);
          return;
        }
        if (err && err.retryAfter) wait = err.retryAfter;
      }
      if (finished) {
        this.set('ended');
        this.stop();
        return;
      }
      if (this.stopped) return;
      this.set('reconnecting');
      await new Promise((r) => setTimeout(r, Math.max(backoff, wait)));
      backoff = Math.min(backoff * 2, 4000);
    }
  }

  // once runs one connection; true when the stream ended for good.
  async once() {
    this.ctrl = new AbortController();
    const headers = {Accept: 'text/event-stream'};
    if (this.last > 0) headers['Last-Event-ID'] = String(this.last);
    const res = await fetch(this.url, {headers, signal: this.ctrl.signal, credentials: 'same-origin', cache: 'no-store'});
    if (res.status === 204) return true;
    if (res.status === 401) {
      location.assign('/login');
      throw Object.assign(new Error('log in first'), {fatal: true});
    }
    if (res.status === 404 || res.status === 400) {
      throw Object.assign(new Error(`event stream: ${res.status}`), {fatal: true});
    }
    if (res.status === 503) {
      // The server serves its most streams at once (or cannot serve now):
      // come back when it says, with a little spread so tabs do not return
      // together.
      const secs = Number(res.headers.get('Retry-After'));
      const retryAfter = secs > 0 ? secs * 1000 + Math.random() * 1000 : 0;
      throw Object.assign(new Error('event stream: 503'), {retryAfter});
    }
    if (!res.ok || !res.body) throw new Error(`event stream: ${res.status}`);
    this.lastByte = Date.now();
    this.set('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let id = '';
    let data = [];
    let sawFinish = false;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      this.lastByte = Date.now();
      if (this.state === 'stale') this.set('live');
      buf += value;
      let at = 0;
      let nl;
      while ((nl = buf.indexOf('\n', at)) >= 0) {
        let line = buf.slice(at, nl);
        at = nl + 1;
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) sawFinish = this.dispatch(id, data.join('\n')) || sawFinish;
          id = '';
          data = [];
        } else if (line.startsWith(':')) {
          // a comment: keep-alive
        } else {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? '' : line.slice(colon + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'id') id = val;
          else if (field === 'data') data.push(val);
        }
      }
      buf = buf.slice(at);
    }
    return sawFinish;
  }

  // dispatch delivers one message; true when it is the run's end.
  dispatch(id, data) {
    const seq = Number(id);
    if (seq && seq <= this.last) return false; // already delivered
    let e;
    try { e = JSON.parse(data); } catch { return false; }
    if (seq) this.last = seq;
    this.onEvent(seq, e);
    return e.type === 'run.finished';
  }
}
