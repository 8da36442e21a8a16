// Small DOM and formatting helpers shared by the views.

// h builds an element: h('td', {class: 'x', dataset: {id}}, 'text', child).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      // through the CSSOM: the page's CSP forbids style attributes
      else if (k === 'style') el.style.cssText = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// clear empties el and appends children.
export function fill(el, ...children) {
  el.replaceChildren(...children.flat().filter((c) => c != null && c !== false));
  return el;
}

export function firstLine(s) {
  const line = (s || '').split('\n').find((l) => l.trim() !== '') || '';
  return line.length > 140 ? line.slice(0, 139) + '…' : line;
}

export function ms(t) {
  if (!t) return 0;
  const v = Date.parse(t);
  return Number.isNaN(v) || v <= 0 ? 0 : v;
}

// dur formats milliseconds: 850ms, 12.3s, 4m05s, 2h10m.
export function dur(d) {
  if (d == null || d < 0 || Number.isNaN(d)) return '';
  if (d < 1000) return `${Math.round(d)}ms`;
  if (d < 60e3) return `${(d / 1000).toFixed(1)}s`;
  const s = Math.floor(d / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, '0')}m`;
}

export function age(t, now = Date.now()) {
  const v = ms(t);
  return v ? dur(Math.max(0, now - v)) + ' ago' : '';
}

export function tokens(u) {
  if (!u) return 0;
  return (u.input_tokens || 0) + (u.output_tokens || 0);
}

export function num(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (n >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return String(n);
}

export function badge(status) {
  return h('span', {class: `badge s-${status || 'unknown'}`}, status || '?');
}

export const finalStatus = (s) => s === 'succeeded' || s === 'failed' || s === 'cancelled';

// folded shows long text folded behind a <details>.
export function folded(text, limit = 600) {
  text = text || '';
  if (text.length <= limit && text.split('\n').length <= 12) return h('pre', {class: 'text'}, text);
  return h('details', {class: 'fold'},
    h('summary', null, `${text.slice(0, 120).replace(/\s+/g, ' ')}… (${text.length} chars)`),
    h('pre', {class: 'text'}, text));
}

export function prettyJSON(s) {
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch { return s || ''; }
}
