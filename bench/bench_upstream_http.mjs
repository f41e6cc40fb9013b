// bench/bench_upstream_http.mjs MOONBOX [N] -- one upstream tool call over Streamable HTTP
// against the same server over stdio, in one run (run by bench_upstream_http.sh, which installs
// tests/mcp's pins): the everything server's echo, called N times inside one run_lua through
// tools.NAME.echo, over stdio (its own process), over HTTP with SSE answers and with JSON
// answers (tests/mcp/http_upstream.mjs on 127.0.0.1: the SDK's StreamableHTTPServerTransport
// in front of the same createServer), and over HTTP to a hand-written echo with no SDK server
// (what the transport itself costs); and, for scale, the SDK's own client straight to each.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const moonbox = process.argv[2];
const N = Number(process.argv[3] ?? 500);
const everything = resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'moonbox-bench-http-'));

const server = spawn(process.execPath, ['http_upstream.mjs'], { stdio: ['ignore', 'pipe', 'inherit'] });
const base = await new Promise((ok) => {
  let out = '';
  server.stdout.on('data', (d) => {
    out += d;
    const m = out.match(/PORT (\d+)/);
    if (m) ok(`http://127.0.0.1:${m[1]}`);
  });
});

const policy = join(dir, 'policy.json');
writeFileSync(policy, JSON.stringify({
  limits: { timeout: '600s' },
  upstreams: {
    stdio: { command: process.execPath, args: [everything], tools: ['echo'] },
    sse: { url: `${base}/mcp`, tools: ['echo'] },
    json: { url: `${base}/mcp-json`, tools: ['echo'] },
    raw: { url: `${base}/hostile`, tools: ['echo'] },
  },
}));
const client = new Client({ name: 'bench', version: '1' });
await client.connect(new StdioClientTransport({
  command: moonbox, args: ['mcp', '--code-mode', '--isolate', 'none', '--policy', policy],
  stderr: 'ignore',
}));

// The mean of N calls inside one run_lua, in microseconds (a warm-up run first).
async function inLua(name) {
  const code = (n) => `for i = 1, ${n} do tools.${name}.echo{message = "x"} end return 0`;
  await client.callTool({ name: 'run_lua', arguments: { code: code(20) } });
  const t = process.hrtime.bigint();
  const r = await client.callTool({ name: 'run_lua', arguments: { code: code(N) } });
  const us = Number(process.hrtime.bigint() - t) / 1000 / N;
  if (r.structuredContent.status !== 'ok') throw new Error(JSON.stringify(r.structuredContent.error));
  return us;
}

// The median of N calls by the SDK's own client, in microseconds.
async function straight(transport) {
  const c = new Client({ name: 'bench-straight', version: '1' });
  await c.connect(transport);
  for (let i = 0; i < 20; i++) await c.callTool({ name: 'echo', arguments: { message: 'x' } });
  const times = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    await c.callTool({ name: 'echo', arguments: { message: 'x' } });
    times.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  await c.close();
  times.sort((a, b) => a - b);
  return times[times.length >> 1];
}

const rows = [];
for (let round = 1; round <= 2; round++) {
  // the second round in the reverse order
  const order = round === 1 ? ['stdio', 'sse', 'json', 'raw'] : ['raw', 'json', 'sse', 'stdio'];
  const got = {};
  for (const name of order) got[name] = await inLua(name);
  rows.push(got);
}
const direct = {
  stdio: await straight(new StdioClientTransport({ command: process.execPath, args: [everything], stderr: 'ignore' })),
  sse: await straight(new StreamableHTTPClientTransport(new URL(`${base}/mcp`))),
  json: await straight(new StreamableHTTPClientTransport(new URL(`${base}/mcp-json`))),
};
await client.close();
server.kill();

const label = {
  stdio: 'stdio (its own process)', sse: 'Streamable HTTP, SSE answers',
  json: 'Streamable HTTP, JSON answers',
  raw: 'HTTP, a hand-written echo on node:http (no SDK server; http_upstream.mjs /hostile)',
};
console.log(`node ${process.version}, N = ${N}`);
console.log('| everything server\'s echo, one call | tools.X.echo in run_lua, µs (mean of N), round 1 | round 2 | SDK client straight to it, µs (median of N) |');
console.log('|---|---:|---:|---:|');
for (const k of ['stdio', 'sse', 'json', 'raw'])
  console.log(`| ${label[k]} | ${rows[0][k].toFixed(0)} | ${rows[1][k].toFixed(0)} | ${direct[k] ? direct[k].toFixed(0) : '-'} |`);
