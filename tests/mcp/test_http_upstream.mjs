// tests/mcp/test_http_upstream.mjs -- upstreams over Streamable HTTP (docs/code-mode.md): the
// official SDK's client against `moonbox mcp --code-mode`, whose upstreams are the official
// everything server behind the SDK's StreamableHTTPServerTransport (SSE and JSON answers) and
// a hostile HTTP server, both from http_upstream.mjs on 127.0.0.1.
// Run by tests/mcp/run.sh (ctest mcp/http_upstream): node test_http_upstream.mjs /path/to/moonbox
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import test from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const moonbox = process.argv[2];
if (!moonbox) throw new Error('usage: node test_http_upstream.mjs /path/to/moonbox');
const dir = mkdtempSync(join(tmpdir(), 'moonbox-http-upstream-'));
const serverScript = resolve(process.cwd(), 'http_upstream.mjs');

// One http_upstream.mjs: its process and base URL.
async function startServer(extra = [], scheme = 'http') {
  const child = spawn(process.execPath, [serverScript, ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((ok, fail) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/PORT (\d+)/);
      if (m) ok(Number(m[1]));
    });
    child.on('exit', (code) => fail(new Error(`http_upstream.mjs exited with ${code}`)));
  });
  return { child, base: `${scheme}://127.0.0.1:${port}` };
}

const stats = async (base) => (await fetch(`${base}/stats`)).json();

// Polls the hostile server's stats until ok(stats) (what moonbox sends after a call returns,
// such as notifications/cancelled or the DELETE at its exit, lands a moment later).
async function statsUntil(base, ok) {
  let s;
  for (let i = 0; i < 100 && !ok((s = await stats(base))); i++)
    await new Promise((r) => setTimeout(r, 100));
  return s;
}

async function connect(upstreams, env = undefined) {
  const policy = join(dir, `policy-${Math.random()}.json`);
  writeFileSync(policy, JSON.stringify({ limits: { timeout: '60s' }, upstreams }));
  const transport = new StdioClientTransport({
    command: moonbox, args: ['mcp', '--code-mode', '--isolate', 'none', '--policy', policy],
    stderr: 'pipe', env,
  });
  const client = new Client({ name: 'moonbox-http-upstream-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function value(client, code) {
  const r = await client.callTool({ name: 'run_lua', arguments: { code } });
  assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent.error));
  return r.structuredContent.value;
}

const server = await startServer();
test.after(() => server.child.kill());

const everything = (path, extra = {}) => ({ url: `${server.base}${path}`, ...extra });
const hostile = (extra = {}) => ({
  url: `${server.base}/hostile`, headers: { Authorization: 'Bearer t0ken-123' }, tools: ['*'],
  timeout: '2s', max_result: '64k', ...extra,
});

test('the everything server over HTTP: SSE and JSON answers, a tool error for pcall, no tool not allowed', async () => {
  const client = await connect({
    ev: everything('/mcp', { tools: ['echo', 'get-sum', 'get-resource-reference'] }),
    evjson: everything('/mcp-json', { tools: ['get-sum'] }),
    small: everything('/mcp', { tools: ['echo'], max_result: '1k' }),
  });
  try {
    const v = await value(client, `
      local ok, err = pcall(tools.ev["get-resource-reference"], {resourceId = -1})
      local big_ok, big_err = pcall(tools.small.echo, {message = string.rep("m", 4000)})
      return {echo = tools.ev.echo{message = "over http"},
              sum = tools.ev["get-sum"]{a = 40, b = 2},
              json_sum = tools.evjson["get-sum"]{a = 1, b = 2},
              ok = ok, err = err, big_ok = big_ok, big_err = big_err,
              env = tools.ev["get-env"] == nil, small = tools.small.echo{message = "fits"}}`);
    assert.equal(v.echo, 'Echo: over http');
    assert.equal(v.sum, 'The sum of 40 and 2 is 42.');
    assert.equal(v.json_sum, 'The sum of 1 and 2 is 3.');
    assert.equal(v.ok, false);
    assert.match(v.err, /^tools\.ev\.get-resource-reference: Invalid resourceId: -1/);
    assert.equal(v.big_ok, false);
    assert.match(v.big_err, /upstream 'small': a reply of \d+ bytes, over its max_result of 1024 bytes/);
    assert.equal(v.small, 'Echo: fits');
    assert.equal(v.env, true, 'a tool not allowed is not bound');
    const found = await client.callTool({ name: 'search_tools', arguments: { query: 'sum' } });
    assert.match(JSON.stringify(found.structuredContent ?? found.content), /ev\.get-sum/);
  } finally {
    await client.close();
  }
});

test('many sandboxes call one HTTP upstream at once', async () => {
  const client = await connect({ ev: everything('/mcp', { tools: ['get-sum'] }) });
  try {
    const runs = Array.from({ length: 12 }, (_, k) => value(client, `
      local total = 0
      for i = 1, 25 do
        total = tonumber(tools.ev["get-sum"]{a = total, b = ${k}}:match("is (%-?%d+)"))
      end
      return total`));
    const totals = await Promise.all(runs);
    assert.deepEqual(totals, Array.from({ length: 12 }, (_, k) => 25 * k));
  } finally {
    await client.close();
  }
});

test('hostile answers end by the byte cap, the header cap or the timeout, with a clear error', async () => {
  const client = await connect({ h: hostile() });
  try {
    const started = Date.now();
    const v = await value(client, `
      local out = {}
      for _, t in ipairs{"endless", "flood", "bigheader", "manyheaders", "trickle", "silent"} do
        local ok, err = pcall(tools.h[t], {})
        out[t] = ok and "answered" or err
      end
      out.echo = tools.h.echo{text = "still fine"}
      return out`);
    assert.match(v.endless, /upstream 'h': a reply of more than \d+ bytes \(max_result is 65536 bytes; the transfer was stopped\)/);
    assert.match(v.flood, /upstream 'h': a reply of more than \d+ bytes \(max_result is 65536 bytes/);
    assert.match(v.bigheader, /upstream 'h': an answer with a header line too large/);
    assert.match(v.manyheaders, /upstream 'h': an answer with more than 65536 bytes of headers/);
    assert.match(v.trickle, /upstream 'h': tools\/call timed out \(no answer in time; its timeout is 2000 ms\)/);
    assert.match(v.silent, /upstream 'h': tools\/call timed out/);
    assert.equal(v.echo, 'echo still fine', 'SSE with CRLF, comments, a priming event and split data');
    assert.ok(Date.now() - started < 30000, 'two 2 s timeouts, not a hang');
    // the abandoned calls were cancelled by notifications/cancelled, not only by a closed stream
    const s = await statsUntil(server.base, (x) => x.cancelled.length >= 2);
    assert.ok(s.cancelled.length >= 2, JSON.stringify(s.cancelled));
  } finally {
    await client.close();
  }
});

test('a client\'s cancel of a run POSTs notifications/cancelled for its HTTP call', async () => {
  const client = await connect({ h: hostile({ timeout: '60s' }) });
  try {
    const before = (await stats(server.base)).cancelled.length;
    const controller = new AbortController();
    const started = Date.now();
    const pending = client.callTool({ name: 'run_lua', arguments: { code: 'return tools.h.silent{}' } },
      undefined, { signal: controller.signal });
    await new Promise((r) => setTimeout(r, 500));
    controller.abort();
    await assert.rejects(pending);
    const s = await statsUntil(server.base, (x) => x.cancelled.length > before);
    assert.deepEqual(s.cancelled.slice(before).map((c) => c.reason), ['the run ended']);
    assert.ok(Date.now() - started < 30000, 'by the cancel, not the 60 s timeout');
    assert.equal(await value(client, 'return tools.h.echo{text = "after"}'), 'echo after');
  } finally {
    await client.close();
  }
});

test('the session: headers and version sent, a 404 starts a new session once, sampling declined, list_changed, DELETE at exit', async () => {
  const before = await stats(server.base);
  let mine; // the session in use at the end
  const client = await connect({ h: hostile() });
  try {
    const v = await value(client, `
      return {expire = tools.h.expire{}, sampling = tools.h.sampling{},
              relist = tools.h.relist{}}`);
    assert.equal(v.expire, 'after expiry');
    assert.match(v.sampling, /^declined: moonbox declines sampling\/createMessage/);
    assert.equal(v.relist, 'changed');
    // the changed list is in by the next run (a call thread relists first when it is stale)
    const w = await value(client, 'return tools.h.added{}');
    assert.equal(w, 'called added');
    const s = await stats(server.base);
    assert.equal(s.inits - before.inits, 2, 'initialize again after the 404, once');
    mine = s.sessions.at(-1);
    assert.ok(s.auth.slice(before.auth.length).every((a) => a === 'Bearer t0ken-123'));
    assert.ok(s.versions.slice(before.versions.length).every((x) => x === '2025-11-25'));
  } finally {
    await client.close();
  }
  // the server's end DELETEs its session (after the client's close, a moment later)
  const s = await statsUntil(server.base, (x) => x.deleted.includes(mine));
  assert.ok(s.deleted.includes(mine), `${mine} not in ${JSON.stringify(s.deleted)}`);
});

test('a stream closed before its answer is resumed by a GET with Last-Event-ID, after its retry:', async () => {
  const client = await connect({ h: hostile({ timeout: '20s' }) });
  try {
    const before = (await stats(server.base)).resumes.length;
    const v = await value(client, `
      local ok, err = pcall(tools.h.pollforever, {})
      return {poll = tools.h.poll{}, forever = err}`);
    assert.equal(v.poll, 'after reconnect');
    assert.match(v.forever, /upstream 'h': its answer ended without a response to the request \(resumed too often\)/);
    const resumes = (await stats(server.base)).resumes.slice(before);
    const poll = resumes.filter((r) => r.last.startsWith('poll-'));
    assert.equal(poll.length, 1);
    assert.ok(poll[0].after >= 250, `resumed ${poll[0].after} ms after the close; retry: said 300`);
    assert.equal(resumes.filter((r) => r.last.startsWith('pf-')).length, 32, 'bounded resumes');
  } finally {
    await client.close();
  }
});

test('sessions the server forgot: a new one, by its 404 or by the everything server\'s 400', async () => {
  const client = await connect({
    spec: everything('/mcp', { tools: ['echo'] }),
    ref: everything('/mcp-400', { tools: ['echo'] }),
  });
  try {
    assert.deepEqual(await value(client, 'return {tools.spec.echo{message = "1"}, tools.ref.echo{message = "1"}}'),
      ['Echo: 1', 'Echo: 1']);
    await fetch(`${server.base}/forget`, { method: 'POST' }); // as a restarted server would
    assert.deepEqual(await value(client, 'return {tools.spec.echo{message = "2"}, tools.ref.echo{message = "2"}}'),
      ['Echo: 2', 'Echo: 2']);
  } finally {
    await client.close();
  }
});

test('an upstream that stops mid-session gives an error naming it, never a hang', async () => {
  const other = await startServer();
  const client = await connect({
    gone: { url: `${other.base}/hostile`, tools: ['*'], timeout: '30s' },
  });
  try {
    assert.equal(await value(client, 'return tools.gone.echo{text = "a"}'), 'echo a');
    const started = Date.now();
    setTimeout(() => other.child.kill('SIGKILL'), 500);
    const v = await value(client, `
      local ok, err = pcall(tools.gone.silent, {})
      local ok2, err2 = pcall(tools.gone.echo, {text = "b"})
      return {err, err2}`);
    assert.match(v[0], /upstream 'gone': HTTP request failed/);
    assert.match(v[1], /upstream 'gone': HTTP request failed: Couldn't connect/);
    assert.ok(Date.now() - started < 15000, 'ended by the failure, not by the 30 s timeout');
  } finally {
    other.child.kill('SIGKILL');
    await client.close();
  }
});

test('no proxy from the environment, no redirect followed, TLS always verified', async (t) => {
  // a proxy the environment names (nothing listens there): the call still goes straight
  const proxy = 'http://127.0.0.1:9';
  const client = await connect({ h: hostile() }, {
    ...process.env, http_proxy: proxy, https_proxy: proxy, HTTPS_PROXY: proxy, ALL_PROXY: proxy,
    all_proxy: proxy, NO_PROXY: '', no_proxy: '',
  });
  try {
    const v = await value(client, `
      local ok, err = pcall(tools.h.redirect, {})
      return {echo = tools.h.echo{text = "direct"}, redirect = err}`);
    assert.equal(v.echo, 'echo direct');
    assert.match(v.redirect, /upstream 'h': answered HTTP 307, a redirect \(not followed/);
  } finally {
    await client.close();
  }
  // HTTPS with a certificate nobody signed: refused at the handshake
  const cert = join(dir, 'cert.pem'), key = join(dir, 'key.pem');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key,
    '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
  { encoding: 'utf8' });
  if (made.error || made.status !== 0) return t.skip('openssl cannot make a certificate here');
  const tls = await startServer(['--tls', cert, key], 'https');
  try {
    const policy = join(dir, 'policy-tls.json');
    writeFileSync(policy, JSON.stringify({ upstreams: { tls: { url: `${tls.base}/hostile`, tools: ['*'] } } }));
    const r = spawnSync(moonbox, ['mcp', '--code-mode', '--policy', policy],
      { input: '', encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /upstream 'tls': no handshake: .*(SSL certificate|certificate verify|self.signed)/i);
  } finally {
    tls.child.kill();
  }
});

test('--upstream NAME=URL with --allow-tool, no policy file', async () => {
  const client = new Client({ name: 'moonbox-http-upstream-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: moonbox, stderr: 'pipe',
    args: ['mcp', '--code-mode', '--isolate', 'none', '--upstream', `ev=${server.base}/mcp`,
      '--allow-tool', 'ev.echo'],
  }));
  try {
    assert.deepEqual(await value(client, 'return {tools.ev.echo{message = "flag"}, tools.ev["get-sum"] == nil}'),
      ['Echo: flag', true]);
  } finally {
    await client.close();
  }
});

test('a bad URL stops the server with an error naming the upstream', () => {
  const r = spawnSync(moonbox, ['mcp', '--code-mode', '--upstream', 'far=http://mcp.example.com/mcp'],
    { input: '', encoding: 'utf8', timeout: 20000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /--upstream far: plain http:\/\/ is allowed to loopback only/);
});
