// The HTTP API as the page uses it: JSON in and out, the session's CSRF
// value on every state-changing request, and a trip to /login when the
// session is gone.

function cookie(name) {
  for (const part of document.cookie.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === name) return decodeURIComponent(v.join('='));
  }
  return '';
}

export const csrf = () => cookie('formica_csrf');
export const loggedIn = () => csrf() !== '';

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(method, path, body) {
  const headers = {Accept: 'application/json'};
  const init = {method, headers, credentials: 'same-origin'};
  if (method !== 'GET') {
    headers['X-Formica-CSRF'] = csrf();
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    location.assign('/login');
    throw new APIError(401, 'unauthorized', 'log in first');
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!res.ok) {
    const e = data && data.error ? data.error : {code: String(res.status), message: text || res.statusText};
    throw new APIError(res.status, e.code, e.message);
  }
  return data;
}

// features is the set of "METHOD /path" operations the coordinator serves,
// read from its OpenAPI document, so the page offers only what exists
// (resume, transcripts) on the coordinator it talks to.
let featureSet;
export function features() {
  featureSet ??= api('GET', '/v1/openapi.json').then((doc) => {
    const s = new Set();
    for (const [path, item] of Object.entries(doc.paths || {})) {
      for (const m of Object.keys(item)) if (m !== 'parameters') s.add(`${m.toUpperCase()} ${path}`);
    }
    s.info = doc.info || {};
    return s;
  }).catch(() => new Set());
  return featureSet;
}

export async function logout() {
  await fetch('/logout', {method: 'POST', credentials: 'same-origin', headers: {'X-Formica-CSRF': csrf()}});
  location.assign('/login');
}
