// tests/mcp/test_http.mjs -- `moonbox mcp --http` (the Streamable HTTP transport, MCP
// 2025-11-25) against the official TypeScript SDK's StreamableHTTPClientTransport, plus raw
// HTTP requests for what no SDK would send: a foreign Origin, a missing or wrong token, an
// oversized body, an unknown session id, piles of idle connections, and the hostile JSON-RPC
// that test_mcp.mjs sends on stdin, replayed as POST bodies.
// Run by tests/mcp/run.sh (ctest mcp/http): node test_http.mjs /path/to/moonbox
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import test from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const moonbox = process.argv[2];
if (!moonbox) throw new Error('usage: node test_http.mjs /path/to/moonbox');
const dir = mkdtempSync(join(tmpdir(), 'moonbox-http-'));
const baseArgs = ['mcp', '--isolate', 'none', '--timeout', '8s', '--memory', '32M'];

// Starts the server on a port the kernel picks; resolves once it printed the address.
function startServer(extra = [], listen = '127.0.0.1:0') {
  const child = spawn(moonbox, [...baseArgs, '--http', listen, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`no address within 60 s: ${err}`)), 60000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      err += chunk;
      const m = err.match(/listening on (https?):\/\/([0-9.]+):(\d+)\/mcp/);
      if (m) {
        clearTimeout(timer);
        ok({ child, url: `${m[1]}://127.0.0.1:${m[3]}/mcp`, port: Number(m[3]), stderr: () => err });
      }
    });
    child.on('exit', (code) => fail(new Error(`moonbox exited ${code}: ${err}`)));
  });
}

async function stopServer(s) {
  const exited = new Promise((ok) => s.child.on('exit', (code, signal) => ok({ code, signal })));
  s.child.kill('SIGTERM');
  const { code } = await exited;
  assert.equal(code, 0, s.stderr()); // a clean stop: calls finished, listener closed
}

async function connect(url, headers = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'moonbox-http-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

const run = (client, args) => client.callTool({ name: 'run_lua', arguments: args });

// One raw request on a connection of its own: { status, headers, text, json }.
function raw(url, { method = 'POST', headers = {}, body, localAddress } = {}) {
  const u = new URL(url);
  const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers };
  for (const k of Object.keys(h)) if (h[k] === undefined) delete h[k];
  return new Promise((ok, fail) => {
    const tls = u.protocol === 'https:';
    const r = (tls ? https : http).request({ host: u.hostname, port: u.port, path: u.pathname, method, headers: h, agent: false,
      localAddress, rejectUnauthorized: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let json;
        try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
        ok({ status: res.statusCode, headers: res.headers, text, json });
      });
    });
    r.on('error', fail);
    if (body !== undefined) r.write(body);
    r.end();
  });
}

const msg = (id, method, params) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
const initParams = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } };

// A raw session: initialize, then notifications/initialized; returns its id.
async function rawSession(url, headers = {}, idPattern = /^[0-9a-f]{64}$/) {
  const r = await raw(url, { headers, body: msg(1, 'initialize', initParams) });
  assert.equal(r.status, 200, r.text);
  const sid = r.headers['mcp-session-id'];
  assert.match(sid, idPattern);
  const n = await raw(url, { headers: { ...headers, 'Mcp-Session-Id': sid }, body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' });
  assert.equal(n.status, 202);
  return sid;
}

test('the SDK over HTTP: initialize, tools/list, run_lua, a session across calls, DELETE then 404', async () => {
  const s = await startServer();
  try {
    const { client, transport } = await connect(s.url);
    assert.equal(client.getServerVersion().name, 'moonbox');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['run_lua', 'check_lua', 'reset_session', 'close_session']);
    let r = await run(client, { code: 'return 1 + 1' });
    assert.equal(r.structuredContent.value, 2);
    r = await run(client, { code: 'x = 41', session: 'a' });
    assert.equal(r.structuredContent.session.created, true);
    r = await run(client, { code: 'return x + 1', session: 'a' });
    assert.equal(r.structuredContent.value, 42);
    await client.ping();
    const sid = transport.sessionId;
    assert.match(sid, /^[0-9a-f]{64}$/); // 256 bits from getrandom

    // Another client never sees this client's session names.
    const other = await connect(s.url);
    r = await run(other.client, { code: 'return x', session: 'a' });
    assert.equal(r.structuredContent.session.created, true);
    assert.equal(r.structuredContent.value, null);
    await other.client.close();

    await transport.terminateSession(); // DELETE
    const after = await raw(s.url, { headers: { 'Mcp-Session-Id': sid }, body: msg(9, 'ping') });
    assert.equal(after.status, 404);
    await client.close();
  } finally {
    await stopServer(s);
  }
});

test('one slow call does not stall another client; one client cannot flood the calls', async () => {
  const s = await startServer();
  try {
    const a = await connect(s.url);
    const b = await connect(s.url);
    const order = [];
    const slow = run(a.client, { code: 'while true do end', limits: { timeout_ms: 4000 } }).then((r) => {
      order.push('slow');
      return r;
    });
    await new Promise((ok) => setTimeout(ok, 300));
    const quick = await run(b.client, { code: 'return "quick"' });
    order.push('quick');
    assert.equal(quick.structuredContent.value, 'quick');
    assert.equal((await slow).structuredContent.status, 'time_limit');
    assert.deepEqual(order, ['quick', 'slow']);

    // Six long calls from one client at once: past its cap (4) they are refused, and say why.
    const flood = await Promise.all(Array.from({ length: 6 }, () =>
      run(a.client, { code: 'while true do end', limits: { timeout_ms: 1500 } })));
    const busy = flood.filter((r) => r.isError && /server busy/.test(r.content[0].text));
    assert.ok(busy.length >= 2, JSON.stringify(flood.map((r) => r.content[0].text.slice(0, 80))));
    await a.client.close();
    await b.client.close();
  } finally {
    await stopServer(s);
  }
});

test('refusals: Origin, method, version header, content type, unknown session, body size', async () => {
  const s = await startServer();
  try {
    let r = await raw(s.url, { headers: { Origin: 'http://evil.example' }, body: msg(1, 'initialize', initParams) });
    assert.equal(r.status, 403);
    r = await raw(s.url, { headers: { Origin: 'http://localhost.evil.example:80' }, body: msg(1, 'ping') });
    assert.equal(r.status, 403);
    r = await raw(s.url, { headers: { Origin: 'null' }, body: msg(1, 'ping') });
    assert.equal(r.status, 403);
    r = await raw(s.url, { headers: { Origin: `http://localhost:${s.port}` }, body: msg(1, 'initialize', initParams) });
    assert.equal(r.status, 200);
    assert.equal(r.json.result.protocolVersion, '2025-11-25');

    r = await raw(s.url, { method: 'GET', headers: { 'Content-Type': undefined } });
    assert.equal(r.status, 405);
    r = await raw(s.url.replace('/mcp', '/other'), { body: msg(1, 'ping') });
    assert.equal(r.status, 404);
    r = await raw(s.url, { headers: { 'MCP-Protocol-Version': '1999-01-01' }, body: msg(1, 'ping') });
    assert.equal(r.status, 400);
    r = await raw(s.url, { headers: { 'Content-Type': 'text/plain' }, body: msg(1, 'ping') });
    assert.equal(r.status, 415);
    r = await raw(s.url, { headers: { 'Mcp-Session-Id': 'f'.repeat(64) }, body: msg(1, 'ping') });
    assert.equal(r.status, 404);
    r = await raw(s.url, { headers: { 'Mcp-Session-Id': 'x' }, body: msg(1, 'ping') });
    assert.equal(r.status, 404);
    r = await raw(s.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': 'f'.repeat(64) } });
    assert.equal(r.status, 404);

    // A declared 40 MB body: refused from its headers, before any of it is read.
    r = await new Promise((ok, fail) => {
      const q = http.request({ host: '127.0.0.1', port: s.port, path: '/mcp', method: 'POST', agent: false,
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(40 << 20) } }, (res) => ok({ status: res.statusCode }));
      q.on('error', fail);
      q.write('{');
    });
    assert.equal(r.status, 413);
    // A chunked body that grows past the cap (32 MiB): refused (413 or the connection closed).
    const closed = await new Promise((ok) => {
      const q = http.request({ host: '127.0.0.1', port: s.port, path: '/mcp', method: 'POST', agent: false,
        headers: { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' } }, (res) => ok(res.statusCode));
      q.on('error', () => ok('closed'));
      const chunk = Buffer.alloc(1 << 20, 0x20);
      let sent = 0;
      const pump = () => {
        while (sent < 40) {
          sent++;
          if (!q.write(chunk)) return q.once('drain', pump);
        }
        q.end();
      };
      pump();
    });
    assert.ok(closed === 413 || closed === 'closed', String(closed));

    // 100 KiB of headers: past the 32 KiB a connection may hold (431, or the connection closed).
    const big = await raw(s.url, { headers: { 'X-Pad': 'x'.repeat(100 << 10) }, body: msg(1, 'ping') }).then((q) => q.status, () => 'closed');
    assert.ok(big === 431 || big === 413 || big === 'closed', String(big));

    // The server still serves.
    const sid = await rawSession(s.url);
    r = await raw(s.url, { headers: { 'Mcp-Session-Id': sid }, body: msg(2, 'ping') });
    assert.equal(r.status, 200);
  } finally {
    await stopServer(s);
  }
});

test('a bearer token: required on every request, a session id alone is not enough', async () => {
  const tokenFile = join(dir, 'token');
  const token = 'moonbox-test-token-0123456789abcdef';
  writeFileSync(tokenFile, token + '\n');
  const s = await startServer(['--http-token-file', tokenFile]);
  try {
    const auth = { Authorization: `Bearer ${token}` };
    const { client, transport } = await connect(s.url, auth);
    const r = await run(client, { code: 'return 7' });
    assert.equal(r.structuredContent.value, 7);
    const sid = transport.sessionId;

    let q = await raw(s.url, { body: msg(1, 'initialize', initParams) });
    assert.equal(q.status, 401);
    assert.match(q.headers['www-authenticate'], /^Bearer/);
    q = await raw(s.url, { headers: { Authorization: `Bearer ${token}x` }, body: msg(1, 'initialize', initParams) });
    assert.equal(q.status, 401);
    q = await raw(s.url, { headers: { Authorization: `Bearer ${token.slice(0, -1)}` }, body: msg(1, 'ping') });
    assert.equal(q.status, 401);
    // Another client that learned the session id, without the token.
    q = await raw(s.url, { headers: { 'Mcp-Session-Id': sid }, body: msg(5, 'tools/call', { name: 'run_lua', arguments: { code: 'return 1' } }) });
    assert.equal(q.status, 401);
    q = await raw(s.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': sid } });
    assert.equal(q.status, 401);
    q = await raw(s.url, { headers: { ...auth, 'Mcp-Session-Id': sid }, body: msg(6, 'ping') });
    assert.equal(q.status, 200); // still open
    await client.close();
  } finally {
    await stopServer(s);
  }
});

test('off loopback: a token and TLS (or --http-behind-proxy) are required', async () => {
  const tokenFile = join(dir, 'token2');
  writeFileSync(tokenFile, 'another-test-token-0123456789\n');
  let r = spawnSync(moonbox, [...baseArgs, '--http', '0.0.0.0:0'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /needs --http-token-file/);
  r = spawnSync(moonbox, [...baseArgs, '--http', '0.0.0.0:0', '--http-token-file', tokenFile], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--http-cert and --http-key, or --http-behind-proxy/);
  const weak = join(dir, 'weak');
  writeFileSync(weak, 'short\n');
  r = spawnSync(moonbox, [...baseArgs, '--http', '127.0.0.1:0', '--http-token-file', weak], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /16 to/);
  r = spawnSync(moonbox, ['mcp', '--http-token-file', tokenFile], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /go with --http/);
});

test('HTTPS with --http-cert/--http-key, off loopback with a token', async (t) => {
  const cert = join(dir, 'cert.pem'), key = join(dir, 'key.pem');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '2', '-subj', '/CN=127.0.0.1'], { encoding: 'utf8' });
  if (made.error || made.status !== 0) return t.skip('openssl cannot make a certificate here');
  const tokenFile = join(dir, 'token3');
  const token = 'tls-test-token-0123456789abcdef';
  writeFileSync(tokenFile, token + '\n');
  const s = await startServer(['--http-cert', cert, '--http-key', key, '--http-token-file', tokenFile], '0.0.0.0:0');
  try {
    assert.match(s.url, /^https:/);
    let r = await raw(s.url, { headers: { Authorization: `Bearer ${token}` }, body: msg(1, 'initialize', initParams) });
    assert.deepEqual([r.status, r.json.result.serverInfo.name], [200, 'moonbox']);
    r = await raw(s.url, { body: msg(1, 'ping') });
    assert.equal(r.status, 401);
    // Plain HTTP to the HTTPS port is not served.
    const plain = await raw(s.url.replace('https:', 'http:'), { body: msg(1, 'ping') }).then((q) => q.status, () => 'closed');
    assert.notEqual(plain, 200);
  } finally {
    await stopServer(s);
  }
});

test('idle connections are bounded and do not block a new client', async () => {
  const s = await startServer();
  const sockets = [];
  try {
    // 100 silent connections from one address (127.0.0.2, loopback too): past the per-address
    // cap (16) the server closes them at once.
    let closedEarly = 0;
    await Promise.all(Array.from({ length: 100 }, () => new Promise((ok) => {
      const c = net.connect({ host: '127.0.0.1', port: s.port, localAddress: '127.0.0.2' });
      sockets.push(c);
      c.on('error', () => {});
      c.on('close', () => closedEarly++);
      c.on('connect', () => setTimeout(ok, 10));
      c.on('close', ok);
    })));
    await new Promise((ok) => setTimeout(ok, 1000));
    assert.ok(closedEarly >= 100 - 16, `only ${closedEarly} of 100 idle connections were refused`);
    // A new client from another address is served while they are still open.
    const { client } = await connect(s.url);
    const r = await run(client, { code: 'return "served"' });
    assert.equal(r.structuredContent.value, 'served');
    await client.close();
  } finally {
    for (const c of sockets) c.destroy();
    await stopServer(s);
  }
});

test('hostile JSON-RPC over HTTP gets error replies, and the server keeps serving', async () => {
  const s = await startServer();
  try {
    let r = await raw(s.url, { body: msg(1, 'tools/call', { name: 'run_lua', arguments: { code: 'return 1' } }) });
    assert.equal(r.status, 400); // no Mcp-Session-Id
    assert.equal(r.json.error.code, -32600);
    assert.match(r.json.error.message, /initialize first/);
    assert.equal(r.headers['mcp-session-id'], undefined); // no session without initialize
    r = await raw(s.url, { body: '{"jsonrpc":"2.0","method":"notifications/initialized"}' });
    assert.equal(r.status, 400);
    r = await raw(s.url, { body: msg(2, 'initialize', { capabilities: {} }) }); // no protocolVersion
    assert.deepEqual([r.status, r.json.error.code, r.headers['mcp-session-id']], [400, -32602, undefined]);

    const sid = await rawSession(s.url);
    const post = (body) => raw(s.url, { headers: { 'Mcp-Session-Id': sid }, body });

    r = await post('{"jsonrpc":"2.0","id":3,"method":');
    assert.equal(r.status, 400);
    assert.deepEqual([r.json.id, r.json.error.code], [null, -32700]);
    r = await post(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":4,"method":"pi'), Buffer.from([0xff, 0xc0]), Buffer.from('ng"}')]));
    assert.equal(r.json.error.code, -32700);
    r = await post('['.repeat(200000) + ']'.repeat(200000));
    assert.equal(r.json.error.code, -32700);
    r = await post('[' + msg(5, 'ping') + ']');
    assert.deepEqual([r.status, r.json.id, r.json.error.code], [400, null, -32600]);
    r = await post('');
    assert.equal(r.status, 400);
    r = await post(msg(6, 'no/such/method'));
    assert.deepEqual([r.status, r.json.id, r.json.error.code], [200, 6, -32601]);
    r = await post(msg(7, 'initialize', initParams));
    assert.match(r.json.error.message, /already initialized/);

    // A reused id while the first call still runs.
    const first = post(msg(8, 'tools/call', { name: 'run_lua', arguments: { code: 'while true do end', limits: { timeout_ms: 1500 } } }));
    await new Promise((ok) => setTimeout(ok, 300));
    r = await post(msg(8, 'tools/call', { name: 'run_lua', arguments: { code: 'return 1' } }));
    assert.deepEqual([r.json.id, r.json.error.code], [8, -32600]);
    assert.match(r.json.error.message, /already in use/);
    r = await first;
    assert.equal(r.json.result.structuredContent.status, 'time_limit');

    // A dropped connection is not a cancel: the call runs on (its id is still in use).
    const dropped = http.request({ host: '127.0.0.1', port: s.port, path: '/mcp', method: 'POST', agent: false,
      headers: { 'Content-Type': 'application/json', 'Mcp-Session-Id': sid } });
    dropped.on('error', () => {});
    dropped.end(msg(11, 'tools/call', { name: 'run_lua', arguments: { code: 'while true do end', limits: { timeout_ms: 2000 } } }));
    await new Promise((ok) => setTimeout(ok, 300));
    dropped.destroy();
    await new Promise((ok) => setTimeout(ok, 200));
    r = await post(msg(11, 'tools/call', { name: 'run_lua', arguments: { code: 'return 1' } }));
    assert.match(r.json.error.message, /already in use/);
    await new Promise((ok) => setTimeout(ok, 2500)); // it ends on its time limit

    // A cancelled call: the POST still ends (202, no JSON-RPC response).
    const doomed = post(msg(10, 'tools/call', { name: 'run_lua', arguments: { code: 'while true do end', limits: { timeout_ms: 6000 } } }));
    await new Promise((ok) => setTimeout(ok, 300));
    r = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 10 } }));
    assert.equal(r.status, 202);
    r = await doomed;
    assert.equal(r.status, 202);

    // Many session names: this client's cap (8) answers the ones past it, and says so.
    let refused = 0;
    for (let i = 0; i < 20; i++) {
      r = await post(msg(100 + i, 'tools/call', { name: 'run_lua', arguments: { session: `s${i}`, code: 'return 1' } }));
      if (r.json.result.isError) {
        assert.match(r.json.result.content[0].text, /too many sessions/);
        refused++;
      }
    }
    assert.equal(refused, 20 - 8);

    r = await post(msg(9, 'ping'));
    assert.deepEqual(r.json, { jsonrpc: '2.0', id: 9, result: {} });
  } finally {
    await stopServer(s);
  }
});

test('--http-session-prefix: ids start with NAME-, another prefix on the same random part is 404', async () => {
  const s = await startServer(['--http-session-prefix', 'edge-1']);
  try {
    const { client, transport } = await connect(s.url);
    const sid = transport.sessionId;
    assert.match(sid, /^edge-1-[0-9a-f]{64}$/);
    let r = await run(client, { code: 'x = 5', session: 'k' });
    r = await run(client, { code: 'return x * 2', session: 'k' });
    assert.equal(r.structuredContent.value, 10);
    const hex = sid.slice('edge-1-'.length);
    for (const forged of [`edge-2-${hex}`, `EDGE-1-${hex}`, hex, `edge-1-${hex}0`, `edge-1${hex}`]) {
      r = await raw(s.url, { headers: { 'Mcp-Session-Id': forged }, body: msg(1, 'ping') });
      assert.equal(r.status, 404, forged);
      r = await raw(s.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': forged } });
      assert.equal(r.status, 404, forged);
    }
    r = await raw(s.url, { headers: { 'Mcp-Session-Id': sid }, body: msg(2, 'ping') });
    assert.equal(r.status, 200); // the forgeries ended nothing
    const other = await rawSession(s.url, {}, /^edge-1-[0-9a-f]{64}$/);
    assert.notEqual(other, sid);
    await client.close();
  } finally {
    await stopServer(s);
  }
  for (const bad of ['', 'a b', 'a_b', 'x'.repeat(17), 'a/b']) {
    const r = spawnSync(moonbox, [...baseArgs, '--http', '127.0.0.1:0', '--http-session-prefix', bad], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.status, 2, bad);
    assert.match(r.stderr, /--http-session-prefix: .* is not a name of 1 to 16 letters, digits or '-'/);
  }
  const r = spawnSync(moonbox, ['mcp', '--http-session-prefix', 'a'], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /go with --http/);
});

test('code mode over HTTP: the guest calls an upstream tool', async () => {
  const fake = resolve(process.cwd(), 'fake_upstream.mjs');
  const s = await startServer(['--upstream', `fake=node ${fake} normal`, '--allow-tool', 'fake.*']);
  try {
    const { client } = await connect(s.url);
    const r = await run(client, { code: 'local r = tools.fake["echo-args"]{ids = {1, 2}} return r.ids[2]' });
    assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
    assert.equal(r.structuredContent.value, 2);
    await client.close();
  } finally {
    await stopServer(s);
  }
});
