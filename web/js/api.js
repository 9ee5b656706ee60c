// The public HTTP API, nothing else: the dashboard is one more API client.
// Every failure becomes an ApiError carrying the server's {error:{code,message,field}}.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

// A bearer token, only needed when the server requires auth (--require-auth
// or non-loopback binds); entered in the sign-in (auth.js), kept per browser.
export function getToken() {
  try { return localStorage.getItem('rv-token') || ''; } catch (e) { return ''; }
}
export function setToken(t) {
  try { t ? localStorage.setItem('rv-token', t) : localStorage.removeItem('rv-token'); } catch (e) { /* private mode */ }
}

export async function request(method, path, { body, headers = {}, raw = false, signal } = {}) {
  const h = { ...headers };
  const tok = getToken();
  if (tok) h.Authorization = `Bearer ${tok}`;
  let payload = body;
  if (body !== undefined && !(body instanceof Blob) && !(body instanceof ArrayBuffer) && typeof body !== 'string') {
    payload = JSON.stringify(body);
    h['Content-Type'] = 'application/json';
  } else if (typeof body === 'string' && !h['Content-Type']) {
    h['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch(path, { method, headers: h, body: payload, signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `cannot reach the server (${e.message})`);
  }
  if (!res.ok) {
    let code = 'http_' + res.status, message = res.statusText || 'request failed', field = null;
    try {
      const j = await res.json();
      if (j && j.error) ({ code, message, field } = { code: j.error.code, message: j.error.message, field: j.error.field });
    } catch (e) { /* not JSON */ }
    // The token is missing, unknown or revoked: forget it and let the
    // sign-in ask again (auth.js), saying why.
    if (res.status === 401 && path !== '/v1/whoami') {
      setToken('');
      window.dispatchEvent(new CustomEvent('rv-unauthorized', { detail: { message, hadToken: !!tok } }));
    }
    throw new ApiError(res.status, code, message, field);
  }
  if (raw) return res;
  const text = await res.text();
  const j = text ? JSON.parse(text) : null;
  return res.status === 202 ? { ...j, _status: 202 } : j;
}

export const api = {
  health: () => request('GET', '/healthz'),
  whoami: () => request('GET', '/v1/whoami'),
  traces: (params = {}) => request('GET', '/v1/traces' + qs(params)),
  trace: (id) => request('GET', `/v1/traces/${id}`),
  deleteTrace: (id) => request('DELETE', `/v1/traces/${id}`),
  upload: (file, params = {}) => request('POST', '/v1/traces' + qs(params), {
    body: file,
    headers: { 'Content-Type': /\.gz$/i.test(file.name || '') ? 'application/gzip' : 'application/octet-stream' },
  }),
  timeline: (id, params = {}) => request('GET', `/v1/traces/${id}/timeline` + qs(params)),
  whatif: (id, doc, opts = {}) => request('POST', `/v1/traces/${id}/whatif`, { body: doc, ...opts }),
  fleet: (req) => request('POST', '/v1/fleet/whatif', { body: req }),
  job: (id) => request('GET', `/v1/jobs/${id}`),
  platforms: () => request('GET', '/v1/platforms'),
  overheads: (id) => request('GET', `/v1/platforms/${id}/overheads`),
  hardware: () => request('GET', '/v1/hardware'),
  kinds: () => request('GET', '/v1/whatif/kinds'),
};

export function qs(params) {
  const p = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '');
  if (!p.length) return '';
  return '?' + p.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(typeof v === 'object' ? JSON.stringify(v) : v)}`).join('&');
}

// The server this page came from, for the copyable curl commands.
export function origin() {
  return window.location.origin;
}
