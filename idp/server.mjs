// Development / test OpenID Connect provider for the GPU portal.
//
// NOT FOR PRODUCTION: in-memory storage, plain-text passwords in a JSON file,
// plain-HTTP cookies. Built on the certified `oidc-provider` library; only the
// login page, the logout page and the account lookup are our own.
//
// Configuration: JSON file named by $IDP_CONFIG (default: dev-config.json next
// to this file). See README.md for the shape.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TITLE = 'Sign in to Dev IdP';

// ---------------------------------------------------------------- helpers

function log(line) {
  process.stdout.write(`${new Date().toISOString()} ${line}\n`);
}

function fail(message) {
  process.stderr.write(`dev IdP: ${message}\n`);
  process.exit(2);
}

function esc(value) {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function readJson(file, what) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${what} ${file}: ${err.message}`);
  }
}

function sameSecret(a, b) {
  const ha = crypto.createHash('sha256').update(String(a)).digest();
  const hb = crypto.createHash('sha256').update(String(b)).digest();
  return crypto.timingSafeEqual(ha, hb);
}

// ---------------------------------------------------------------- configuration

const configPath = process.env.IDP_CONFIG
  ? path.resolve(process.env.IDP_CONFIG)
  : path.join(HERE, 'dev-config.json');

let config;
try {
  config = readJson(configPath, 'IdP config');
} catch (err) {
  fail(err.message);
}

function relativeToConfig(p) {
  return path.isAbsolute(p) ? p : path.resolve(path.dirname(configPath), p);
}

if (!config.issuer) fail(`"issuer" is missing in ${configPath}`);
const issuerUrl = new URL(config.issuer);
if (issuerUrl.pathname !== '/') fail('"issuer" must not have a path (e.g. http://127.0.0.1:8800)');
const issuer = config.issuer.replace(/\/+$/, '');
const host = config.host ?? issuerUrl.hostname;
const port = Number(config.port ?? (issuerUrl.port || 80));
if (!config.users_file) fail(`"users_file" is missing in ${configPath}`);
const usersPath = relativeToConfig(config.users_file);
if (!Array.isArray(config.clients) || config.clients.length === 0) fail(`"clients" must be a non-empty list in ${configPath}`);

// Client metadata is handed to oidc-provider as given (so any standard
// metadata such as token_endpoint_auth_method works per client); keys starting
// with "_" are treated as comments and dropped.
const clients = config.clients.map((c) => {
  const client = Object.fromEntries(Object.entries(c).filter(([k]) => !k.startsWith('_')));
  return {
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    ...client,
  };
});

// ---------------------------------------------------------------- clock (tests only)

// "clock_offset_s" in the config, or $IDP_CLOCK_OFFSET_S (which wins), runs this IdP with its clock
// that many seconds ahead (negative: behind) of the machine's: every time it issues or checks
// (iat, exp, auth_time, sessions, codes) moves with it. For tests of clock skew between an IdP and
// its clients; never set it for anything else.
const clockOffsetS = Number(process.env.IDP_CLOCK_OFFSET_S ?? config.clock_offset_s ?? 0);
if (!Number.isFinite(clockOffsetS)) fail('"clock_offset_s" / IDP_CLOCK_OFFSET_S must be a number of seconds');
if (clockOffsetS !== 0) {
  const realNow = Date.now.bind(Date);
  Date.now = () => realNow() + clockOffsetS * 1000;
}

// ---------------------------------------------------------------- users

// The users file is re-read at every lookup, so tests can edit it between
// two logins without restarting the IdP. Accepted shapes: a list of users, or
// {"users": [...]} (other top-level keys are ignored, e.g. "_comment").
function readUsers() {
  const data = readJson(usersPath, 'users file');
  const users = Array.isArray(data) ? data : data.users;
  if (!Array.isArray(users)) throw new Error(`users file ${usersPath} has no list of users`);
  return users;
}

function accountIdOf(user) {
  return String(user.claims?.sub ?? user.username);
}

function findUserByAccountId(accountId) {
  return readUsers().find((u) => accountIdOf(u) === accountId);
}

function checkPassword(username, password) {
  if (!username) return undefined;
  const user = readUsers().find((u) => u.username === username);
  // compare anyway so that timing does not reveal unknown usernames
  const ok = sameSecret(password ?? '', user ? user.password ?? '' : crypto.randomUUID());
  return user && ok && user.password ? user : undefined;
}

// ---------------------------------------------------------------- keys

function generateSigningJwk() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: `dev-${crypto.randomBytes(6).toString('hex')}`, use: 'sig', alg: 'RS256' };
}

function loadJwks() {
  if (!config.jwks_file) {
    return { keys: [generateSigningJwk()] }; // per process
  }
  const file = relativeToConfig(config.jwks_file);
  if (fs.existsSync(file)) return readJson(file, 'JWKS file');
  const jwks = { keys: [generateSigningJwk()] };
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(jwks, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
  log(`generated signing key into ${file}`);
  return jwks;
}

let jwks;
try {
  jwks = loadJwks();
} catch (err) {
  fail(err.message);
}

const cookieKeys = Array.isArray(config.cookie_keys) && config.cookie_keys.length
  ? config.cookie_keys
  : [crypto.randomBytes(32).toString('base64url')]; // per process; sessions are in memory anyway

// ---------------------------------------------------------------- pages

function page(title, body, { script = '' } = {}) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>
body{font-family:system-ui,sans-serif;background:#f4f5f7;margin:0;padding:40px 12px}
main{max-width:340px;margin:0 auto;background:#fff;padding:24px 28px;border-radius:6px;box-shadow:0 1px 3px rgba(0,0,0,.2)}
h1{font-size:1.3em;margin-top:0}label{display:block;margin:12px 0 4px}
input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:8px}
button{margin-top:16px;width:100%;padding:9px;font-size:1em;cursor:pointer}
.error{color:#a00;background:#fee;border:1px solid #f99;padding:8px}
.note{color:#666;font-size:.8em;margin-top:18px}
</style>
${script}
</head>
<body>
<main>
${body}
<p class="note">Development identity provider &mdash; not for production use.</p>
</main>
</body>
</html>
`;
}

function loginPage({ uid, clientName, username = '', error = '' }) {
  return page(TITLE, `<h1>${esc(TITLE)}</h1>
${clientName ? `<p>to continue to <strong>${esc(clientName)}</strong></p>` : ''}
${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
<label for="username">Username</label>
<input type="text" id="username" name="username" value="${esc(username)}" autocomplete="username" autocapitalize="none" required autofocus>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`);
}

async function logoutSource(ctx, form) {
  // `form` is oidc-provider's <form id="op.logoutForm" ...> holding the xsrf
  // token. Put the "logout=yes" field and a visible submit button inside it so
  // that a plain HTTP client can parse and post the form, and auto-submit it
  // for browsers with JavaScript.
  const full = form.replace(
    '</form>',
    '<input type="hidden" name="logout" value="yes"/>'
      + '<button type="submit" id="logout-confirm">Sign out</button></form>',
  );
  ctx.type = 'html';
  ctx.body = page('Sign out of Dev IdP', `<h1>Sign out of Dev IdP</h1>
<p>Signing you out&hellip; If nothing happens, press the button.</p>
${full}`, {
    script: `<script>document.addEventListener('DOMContentLoaded',function(){document.getElementById('op.logoutForm').submit();});</script>`,
  });
}

async function postLogoutSuccessSource(ctx) {
  const name = ctx.oidc.client?.clientName || ctx.oidc.client?.clientId;
  ctx.type = 'html';
  ctx.body = page('Signed out of Dev IdP', `<h1>Signed out of Dev IdP</h1>
<p>You have been signed out${name ? ` of ${esc(name)}` : ''}.</p>`);
}

async function renderError(ctx, out) {
  ctx.type = 'html';
  ctx.body = page('Dev IdP error', `<h1>Dev IdP error</h1>
${Object.entries(out).map(([k, v]) => `<p><strong>${esc(k)}</strong>: ${esc(v)}</p>`).join('\n')}`);
}

// ---------------------------------------------------------------- provider

// oidc-provider prints a warning at import time on Node < 22 and one for the
// in-memory adapter. Both are expected for this dev tool: replace them with a
// single startup notice instead of scary red text on every start.
const quiet = [/Unsupported runtime/, /in-memory adapter/];
const origWarn = console.warn;
console.warn = (...args) => {
  if (typeof args[0] === 'string' && quiet.some((re) => re.test(args[0]))) return;
  origWarn(...args);
};
const { default: Provider, errors } = await import('oidc-provider');

const provider = new Provider(issuer, {
  clients,
  jwks,
  cookies: {
    keys: cookieKeys,
    long: { httpOnly: true, sameSite: 'lax', secure: issuerUrl.protocol === 'https:' },
    short: { httpOnly: true, sameSite: 'lax', secure: issuerUrl.protocol === 'https:' },
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username', ...(config.extra_profile_claims ?? [])],
    groups: ['groups'],
  },
  conformIdTokenClaims: false, // scope claims go into the ID token as well
  responseTypes: ['code'],
  clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 supports
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
    userinfo: { enabled: true },
    revocation: { enabled: true },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, sub) {
    const user = findUserByAccountId(sub); // re-reads the users file
    if (!user) return undefined;
    const claims = { ...(user.claims ?? {}) };
    return {
      accountId: sub,
      async claims() {
        return { ...claims, sub }; // passed through as given
      },
    };
  },
  clientBasedCORS(ctx, origin, client) {
    return client.redirectUris.some((uri) => URL.parse(uri)?.origin === origin);
  },
  renderError,
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 3600,
    Session: 12 * 3600,
    Grant: 12 * 3600,
    RefreshToken: 24 * 3600,
  },
});
console.warn = origWarn;

for (const event of ['authorization.error', 'grant.error', 'end_session.error', 'userinfo.error',
  'introspection.error', 'revocation.error', 'jwks.error', 'discovery.error']) {
  provider.on(event, (ctx, err) => {
    log(`  ${event}: ${err.error || err.name}${err.error_description ? ` (${err.error_description})` : ''}`);
  });
}
provider.on('server_error', (ctx, err) => {
  log(`  server_error: ${err.stack || err}`);
});

// ---------------------------------------------------------------- interactions

function readForm(req, limit = 64 * 1024) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > limit) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

function sendHtml(res, status, html) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.end(html);
}

function errorPage(res, status, message) {
  sendHtml(res, status, page('Dev IdP error', `<h1>Dev IdP error</h1><p class="error">${esc(message)}</p>`));
}

async function clientNameFor(clientId) {
  const client = await provider.Client.find(String(clientId ?? ''));
  return client ? client.clientName || client.clientId : undefined;
}

// All configured clients are first-party: consent is granted automatically
// for whatever scopes/claims the prompt reports as missing.
async function autoConsent(req, res, details) {
  const { prompt: { details: missing }, params, session } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  if (missing.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function handleInteraction(req, res, uid, action) {
  let details;
  try {
    details = await provider.interactionDetails(req, res);
  } catch (err) {
    if (err instanceof errors.SessionNotFound) {
      errorPage(res, 400, 'This sign-in request has expired or is unknown. Start again from the application.');
      return;
    }
    throw err;
  }
  if (details.uid !== uid) {
    errorPage(res, 400, 'This sign-in request does not match your browser session. Start again from the application.');
    return;
  }
  const promptName = details.prompt.name;

  if (req.method === 'GET' && !action) {
    if (promptName === 'login') {
      const clientName = await clientNameFor(details.params.client_id);
      sendHtml(res, 200, loginPage({ uid, clientName, username: details.params.login_hint ?? '' }));
      return;
    }
    if (promptName === 'consent') {
      await autoConsent(req, res, details);
      return;
    }
    errorPage(res, 400, `Unsupported interaction prompt: ${promptName}`);
    return;
  }

  if (req.method === 'POST' && action === 'login') {
    if (promptName !== 'login') {
      errorPage(res, 400, 'This sign-in request is not waiting for a login.');
      return;
    }
    const form = await readForm(req);
    const username = (form.get('username') ?? '').trim();
    const user = checkPassword(username, form.get('password'));
    if (!user) {
      log(`  login failed for ${JSON.stringify(username)}`);
      const clientName = await clientNameFor(details.params.client_id);
      sendHtml(res, 200, loginPage({ uid, clientName, username, error: 'Invalid username or password.' }));
      return;
    }
    log(`  login ok: ${username} (sub ${accountIdOf(user)})`);
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: accountIdOf(user) } },
      { mergeWithLastSubmission: false },
    );
    return;
  }

  res.setHeader('Allow', action ? 'POST' : 'GET');
  errorPage(res, 405, 'Method not allowed.');
}

// ---------------------------------------------------------------- server

const providerCallback = provider.callback();
const INTERACTION = /^\/interaction\/([A-Za-z0-9_-]+)(?:\/(login))?\/?$/;

async function handle(req, res) {
  const { pathname } = new URL(req.url, 'http://localhost');
  const match = INTERACTION.exec(pathname);
  if (match) {
    await handleInteraction(req, res, match[1], match[2]);
    return;
  }
  if (pathname === '/healthz') {
    res.setHeader('Content-Type', 'text/plain');
    res.end('ok\n');
    return;
  }
  if (pathname === '/') {
    sendHtml(res, 200, page('Dev IdP', `<h1>Dev IdP</h1>
<p>Issuer <code>${esc(issuer)}</code>. See <a href="/.well-known/openid-configuration">/.well-known/openid-configuration</a>.</p>`));
    return;
  }
  providerCallback(req, res);
}

const server = http.createServer((req, res) => {
  const started = process.hrtime.bigint();
  res.on('finish', () => {
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const location = res.statusCode >= 300 && res.statusCode < 400 ? ` -> ${res.getHeader('location') ?? ''}` : '';
    const url = req.url.length > 300 ? `${req.url.slice(0, 300)}...` : req.url;
    log(`${req.method} ${url} ${res.statusCode} ${ms.toFixed(1)}ms${location}`);
  });
  handle(req, res).catch((err) => {
    log(`  error: ${err.stack || err}`);
    if (!res.headersSent) errorPage(res, 500, 'Internal error in the dev IdP (see its log).');
    else res.destroy();
  });
});

server.on('error', (err) => fail(`cannot listen on ${host}:${port}: ${err.message}`));
server.listen(port, host, () => {
  log(`dev IdP: config ${configPath}, users ${usersPath}, clients ${clients.map((c) => c.client_id).join(', ')}`);
  log('dev IdP: in-memory state (sessions/codes are lost on restart); development only, not for production');
  if (clockOffsetS !== 0) log(`dev IdP: TEST ONLY: clock runs ${clockOffsetS} s ${clockOffsetS > 0 ? 'ahead of' : 'behind'} this machine's`);
  process.stdout.write(`IdP listening on ${issuer}\n`);
});

function shutdown(signal) {
  log(`dev IdP: ${signal} received, shutting down`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
