// Sign-in for servers started with --require-auth: a token entry in the
// header, kept per browser (localStorage, via api.js), sent as
// Authorization: Bearer. A 401 from any call clears it and shows the entry
// again with the server's reason; the header names the token and its scopes
// (GET /v1/whoami). With no auth required, none of this is shown.

import { api, getToken, setToken } from './api.js';

const $ = (id) => document.getElementById(id);

function showSignIn(reason) {
  const dlg = $('signin');
  $('signin-reason').textContent = reason || '';
  $('signin-reason').hidden = !reason;
  $('signin-token').value = '';
  if (!dlg.open) dlg.showModal();
  $('signin-token').focus();
}

function showWho(me) {
  const who = $('who');
  const out = $('signout');
  if (!me || !me.auth_required) {
    who.hidden = true;
    out.hidden = true;
    return;
  }
  who.textContent = `token ${me.name} · ${me.scopes.join(', ')}`;
  who.dataset.scopes = me.scopes.join(',');
  who.hidden = false;
  out.hidden = false;
}

// Asks the server who we are; shows the sign-in when it wants a token.
export async function refreshWho() {
  try {
    const me = await api.whoami();
    showWho(me);
    return me;
  } catch (e) {
    showWho(null);
    if (e.status === 401) showSignIn(getToken() ? e.message : 'This server requires an API token.');
    return null;
  }
}

// onSignedIn: redraws the current page once a token is accepted.
export function setupAuth(onSignedIn) {
  window.addEventListener('rv-unauthorized', (ev) => {
    const { message, hadToken } = ev.detail || {};
    showWho(null);
    showSignIn(hadToken ? `Signed out: the server refused the token (${message})` : 'This server requires an API token.');
  });
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const tok = $('signin-token').value.trim();
    if (!tok) return;
    $('signin-reason').hidden = true;
    $('signin-reason').textContent = '';
    setToken(tok);
    try {
      const me = await api.whoami();
      showWho(me);
      $('signin').close();
      onSignedIn();
    } catch (e) {
      setToken('');
      $('signin-reason').textContent = e.message;
      $('signin-reason').hidden = false;
    }
  });
  $('signout').addEventListener('click', () => {
    setToken('');
    refreshWho();
  });
  refreshWho();
}
