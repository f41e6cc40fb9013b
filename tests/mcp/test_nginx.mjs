// tests/mcp/test_nginx.mjs -- scale-out: two `moonbox mcp --http` servers, each minting its
// session ids after its own --http-session-prefix, behind Debian's nginx routing on the
// Mcp-Session-Id header with the configuration docs/cli.md shows ("Scale-out": this test reads
// it from the page, so the page cannot drift from what works). Through the official SDK client:
// several clients initialize through nginx and land on either server, each keeps a named
// moonbox session across calls (its state lives on one server only, so every call reached that
// server), DELETE ends a session, and an id whose prefix names the other server is a 404.
// Run by tests/mcp/run.sh (ctest mcp/nginx): node test_nginx.mjs /path/to/moonbox, with
// MBX_REPO the source tree; exits 77 (skip) when nginx is not installed.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const moonbox = process.argv[2];
const repo = process.env.MBX_REPO;
if (!moonbox || !repo) throw new Error('usage: MBX_REPO=/path/to/source node test_nginx.mjs /path/to/moonbox');

// Debian's nginx lives in /usr/sbin, which a user's PATH may lack.
function findNginx() {
  const dirs = [...(process.env.PATH || '').split(':'), '/usr/sbin', '/sbin'];
  for (const d of dirs) {
    if (!d) continue;
    try {
      accessSync(join(d, 'nginx'), constants.X_OK);
      return join(d, 'nginx');
    } catch { /* not here */ }
  }
  return null;
}
const nginx = findNginx();
if (!nginx) {
  console.log('SKIP: nginx is not installed (tools/dev installs Debian\'s nginx)');
  process.exit(77);
}

const WAIT_MS = 120000; // a busy 2-core machine: generous, and every wait polls
const dir = mkdtempSync(join(tmpdir(), 'moonbox-nginx-'));
chmodSync(dir, 0o755); // as root nginx's workers run as nobody: they must reach their temp dirs
const children = [];

// The nginx block of docs/cli.md's "Scale-out" section, with its three ports replaced.
function docConfig(ports) {
  const page = readFileSync(join(repo, 'docs', 'cli.md'), 'utf8');
  const section = page.split(/^### Scale-out/m)[1];
  assert.ok(section, 'docs/cli.md has no "### Scale-out" section');
  const block = section.match(/```nginx\n([\s\S]*?)```/);
  assert.ok(block, 'the Scale-out section of docs/cli.md has no nginx block');
  let text = block[1];
  for (const [from, to] of [['127.0.0.1:8080', ports.proxy], ['127.0.0.1:8081', ports.a], ['127.0.0.1:8082', ports.b]]) {
    assert.ok(text.includes(from), `the page's nginx block no longer names ${from}`);
    text = text.split(from).join(`127.0.0.1:${to}`);
  }
  return text;
}

// Starts `moonbox mcp --http` on a free port; resolves with its port once it printed it.
function startBackend(prefix) {
  const args = ['mcp', '--isolate', 'none', '--timeout', '8s', '--memory', '32M', '--http', '127.0.0.1:0',
    '--http-session-prefix', prefix, '--http-behind-proxy'];
  const child = spawn(moonbox, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let err = '';
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`backend ${prefix}: no address within ${WAIT_MS} ms: ${err}`)), WAIT_MS);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk) => {
      err += chunk;
      const m = err.match(/listening on http:\/\/[0-9.]+:(\d+)\/mcp/);
      if (m) {
        clearTimeout(timer);
        ok({ child, port: Number(m[1]), url: `http://127.0.0.1:${m[1]}/mcp`, stderr: () => err });
      }
    });
    child.on('exit', (code) => fail(new Error(`backend ${prefix} exited ${code}: ${err}`)));
  });
}

// A port nobody listens on now (nginx binds it next; a lost race is retried below).
function freePort() {
  return new Promise((ok, fail) => {
    const s = net.createServer();
    s.on('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

// Polls until a TCP connection to port succeeds, or the process exits, or WAIT_MS passes.
async function waitForPort(port, child, what) {
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) return false;
    const up = await new Promise((ok) => {
      const c = net.connect({ host: '127.0.0.1', port });
      c.on('connect', () => { c.destroy(); ok(true); });
      c.on('error', () => ok(false));
    });
    if (up) return true;
    await new Promise((ok) => setTimeout(ok, 100));
  }
  throw new Error(`${what}: port ${port} not open within ${WAIT_MS} ms`);
}

async function startNginx(a, b) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const proxy = await freePort();
    const conf = [
      'daemon off;',
      'worker_processes 1;',
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log notice;`,
      'events { worker_connections 256; }',
      'http {',
      `  access_log ${dir}/access.log;`,
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t}_temp;`),
      docConfig({ proxy, a: a.port, b: b.port }),
      '}',
      '',
    ].join('\n');
    writeFileSync(join(dir, 'nginx.conf'), conf);
    const child = spawn(nginx, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(child);
    let err = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (c) => (err += c));
    if (await waitForPort(proxy, child, 'nginx')) return { child, url: `http://127.0.0.1:${proxy}/mcp` };
    let log = '';
    try { log = readFileSync(join(dir, 'error.log'), 'utf8'); } catch { /* none */ }
    if (!/Address already in use/.test(err + log)) throw new Error(`nginx exited ${child.exitCode}: ${err}\n${log}`);
  }
  throw new Error('nginx: no free port in 5 attempts');
}

async function stop(child, signal = 'SIGTERM') {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode };
  const exited = new Promise((ok) => child.on('exit', (code, sig) => ok({ code, signal: sig })));
  child.kill(signal);
  return exited;
}

// One raw POST (or DELETE): { status, json }.
function raw(url, { method = 'POST', headers = {}, body } = {}) {
  const u = new URL(url);
  return new Promise((ok, fail) => {
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname, method, agent: false,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        let json;
        try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
        ok({ status: res.statusCode, json, text });
      });
    });
    r.on('error', fail);
    if (body !== undefined) r.write(body);
    r.end();
  });
}
const ping = (id) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' });

async function connect(url, i) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: `moonbox-nginx-test-${i}`, version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}
const run = (client, args) => client.callTool({ name: 'run_lua', arguments: args });

async function main() {
  const [a, b] = await Promise.all([startBackend('a'), startBackend('b')]);
  const proxy = await startNginx(a, b);
  const backendOf = { a, b };
  try {
    // Six clients through nginx: new sessions go to either server (round robin), and each id
    // names the server that minted it.
    const clients = [];
    for (let i = 0; i < 6; i++) clients.push(await connect(proxy.url, i));
    const prefixes = clients.map(({ transport }) => {
      const m = transport.sessionId.match(/^([ab])-[0-9a-f]{64}$/);
      assert.ok(m, `session id ${transport.sessionId}`);
      return m[1];
    });
    assert.ok(prefixes.includes('a') && prefixes.includes('b'), `every session went to one server: ${prefixes}`);

    // Each client counts in its own moonbox session "s", interleaved with the others: a call
    // that reached the other server would find no such session (created: true, n from 1).
    for (let round = 1; round <= 3; round++) {
      const results = await Promise.all(clients.map(({ client }, i) =>
        run(client, { session: 's', code: `n = (n or ${i * 100}) + 1 return n` })));
      results.forEach((r, i) => {
        assert.equal(r.structuredContent.status, 'ok', JSON.stringify(r.structuredContent));
        assert.equal(r.structuredContent.value, i * 100 + round);
        assert.equal(r.structuredContent.session.created, round === 1);
      });
    }

    // The session lives on the server its prefix names, and only there.
    for (const [i, { transport }] of clients.entries()) {
      const sid = transport.sessionId;
      const home = backendOf[prefixes[i]], other = backendOf[prefixes[i] === 'a' ? 'b' : 'a'];
      assert.equal((await raw(home.url, { headers: { 'Mcp-Session-Id': sid }, body: ping(1) })).status, 200);
      assert.equal((await raw(other.url, { headers: { 'Mcp-Session-Id': sid }, body: ping(2) })).status, 404);
    }

    // Another server's prefix on this session's random part: nginx sends it to that server,
    // which never minted it (404), as the first server does with it directly.
    const ia = prefixes.indexOf('a'), ib = prefixes.indexOf('b');
    for (const [i, from, to] of [[ia, 'a', 'b'], [ib, 'b', 'a']]) {
      const sid = clients[i].transport.sessionId;
      const swapped = to + sid.slice(from.length);
      let r = await raw(proxy.url, { headers: { 'Mcp-Session-Id': swapped }, body: ping(3) });
      assert.equal(r.status, 404, r.text);
      r = await raw(backendOf[from].url, { headers: { 'Mcp-Session-Id': swapped }, body: ping(4) });
      assert.equal(r.status, 404, r.text);
      r = await raw(proxy.url, { headers: { 'Mcp-Session-Id': sid.slice(from.length + 1) }, body: ping(5) });
      assert.equal(r.status, 404, r.text); // the bare random part: no prefix, unknown everywhere
      r = await raw(proxy.url, { headers: { 'Mcp-Session-Id': sid }, body: ping(6) });
      assert.equal(r.status, 200, r.text); // the real one still works
    }

    // DELETE through nginx ends the session on its server; the id is then unknown (404).
    const gone = clients[ia].transport.sessionId;
    await clients[ia].transport.terminateSession();
    let r = await raw(proxy.url, { headers: { 'Mcp-Session-Id': gone }, body: ping(7) });
    assert.equal(r.status, 404, r.text);
    r = await raw(a.url, { headers: { 'Mcp-Session-Id': gone }, body: ping(8) });
    assert.equal(r.status, 404, r.text);
    // The others keep their state.
    const still = clients[ib];
    const after = await run(still.client, { session: 's', code: 'return n' });
    assert.equal(after.structuredContent.value, ib * 100 + 3);
    for (const { client } of clients) await client.close();
  } finally {
    const n = await stop(proxy.child);
    const ra = await stop(a.child), rb = await stop(b.child);
    assert.equal(ra.code, 0, a.stderr());
    assert.equal(rb.code, 0, b.stderr());
    assert.equal(n.code, 0, JSON.stringify(n)); // nginx's fast shutdown on SIGTERM exits 0
  }
  rmSync(dir, { recursive: true, force: true });
  console.log('nginx: two backends, 6 clients routed by session prefix, DELETE and swapped-prefix 404s: ok');
}

main().catch(async (e) => {
  console.error(e);
  for (const c of children) await stop(c, 'SIGKILL').catch(() => {});
  process.exit(1);
});
