// bench/bench_code_mode.mjs -- code mode against direct tool calls, in one run (docs/code-mode.md):
// a multi-step task against the official memory server (create N entities with observations,
// relate them in a chain, query, summarize) done by one run_lua with tools.mem.* versus the same
// tool calls made one by one through moonbox's proxy, and versus straight to server-memory with
// no moonbox; then the per-call cost of one tool call each way. Printed: round trips, bytes a
// model would have to read (the tool results' text), wall time.
// Usage (bench/bench_code_mode.sh sets up node_modules): node bench_code_mode.mjs MOONBOX [N]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const moonbox = process.argv[2];
const N = Number(process.argv[3] || 100);
if (!moonbox) throw new Error('usage: node bench_code_mode.mjs MOONBOX [N]');
const memoryServer = resolve('node_modules/@modelcontextprotocol/server-memory/dist/index.js');
const dir = mkdtempSync(join(tmpdir(), 'moonbox-bench-code-mode-'));
let fileNo = 0;

async function connect(command, args) {
  const env = { ...process.env, MEMORY_FILE_PATH: join(dir, `memory-${fileNo++}.jsonl`) };
  const transport = new StdioClientTransport({ command, args, env, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(transport);
  return client;
}
const viaMoonbox = () => connect(moonbox, ['mcp', '--isolate', 'none', '--timeout', '60s',
  '--upstream', `mem=node ${memoryServer}`, '--allow-tool', 'mem.*']);
const direct = () => connect('node', [memoryServer]);
const bytesOf = (r) => r.content.reduce((n, c) => n + Buffer.byteLength(c.text ?? JSON.stringify(c)), 0);

// The task as tool calls: [name, arguments] in order.
function calls() {
  const list = [];
  for (let i = 1; i <= N; i++)
    list.push(['create_entities', { entities: [{ name: `e${i}`, entityType: i % 3 ? 'person' : 'place', observations: [`score ${i % 7}`, `group ${i % 5}`] }] }]);
  for (let i = 1; i < N; i++)
    list.push(['create_relations', { relations: [{ from: `e${i}`, to: `e${i + 1}`, relationType: 'next' }] }]);
  list.push(['read_graph', {}]);
  list.push(['search_nodes', { query: 'group 3' }]);
  return list;
}

// What the model wants at the end: computed from the last two results.
function summarize(graph, found) {
  let people = 0, score = 0;
  for (const e of graph.entities) {
    if (e.entityType === 'person') people++;
    score += Number(e.observations[0].split(' ')[1]);
  }
  return { entities: graph.entities.length, relations: graph.relations.length, people, score, group3: found.entities.length };
}

const lua = `
local made = 0
for i = 1, ${N} do
  tools.mem.create_entities{entities = {{name = "e" .. i, entityType = i % 3 ~= 0 and "person" or "place",
    observations = {"score " .. i % 7, "group " .. i % 5}}}}
end
for i = 1, ${N} - 1 do
  tools.mem.create_relations{relations = {{from = "e" .. i, to = "e" .. (i + 1), relationType = "next"}}}
end
local graph = tools.mem.read_graph{}
local found = tools.mem.search_nodes{query = "group 3"}
local people, score = 0, 0
for _, e in ipairs(graph.entities) do
  if e.entityType == "person" then people = people + 1 end
  score = score + tonumber(e.observations[1]:match("%d+"))
end
return {entities = #graph.entities, relations = #graph.relations, people = people, score = score, group3 = #found.entities}`;

async function byCalls(client, prefix) {
  let bytes = 0, last = [];
  const t0 = performance.now();
  for (const [name, args] of calls()) {
    const r = await client.callTool({ name: prefix + name, arguments: args });
    bytes += bytesOf(r);
    last.push(r.structuredContent ?? JSON.parse(r.content[0].text));
  }
  const answer = summarize(last[last.length - 2], last[last.length - 1]);
  return { trips: calls().length, bytes, ms: performance.now() - t0, answer };
}

async function byCode(client) {
  const t0 = performance.now();
  const r = await client.callTool({ name: 'run_lua', arguments: { code: lua } });
  if (r.structuredContent.status !== 'ok') throw new Error(JSON.stringify(r.structuredContent.error));
  return { trips: 1, bytes: bytesOf(r), valueBytes: Buffer.byteLength(JSON.stringify(r.structuredContent.value)), ms: performance.now() - t0, answer: r.structuredContent.value };
}

// One tool call, many times: the median of `times` in microseconds.
async function perCall(fn, times = 200) {
  const v = [];
  for (let i = 0; i < times; i++) {
    const t0 = performance.now();
    await fn();
    v.push((performance.now() - t0) * 1000);
  }
  v.sort((a, b) => a - b);
  return v[Math.floor(v.length / 2)];
}

async function fresh(client, fn) {
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

const a = await viaMoonbox(), b = await viaMoonbox(), c = await direct();
const sorted = (v) => JSON.stringify(v, Object.keys(v).sort());
try {
  // Two rounds, the second in the reverse order, each on a server of its own (empty memory).
  console.log('| way | round trips | bytes returned to the client | wall ms, round 1 | round 2 |');
  console.log('|---|---|---|---|---|');
  const ways = [
    ['code mode: one run_lua (tools.mem.*)', async () => fresh(await viaMoonbox(), byCode)],
    ['direct calls through moonbox (mem__*)', async () => fresh(await viaMoonbox(), (x) => byCalls(x, 'mem__'))],
    ['direct calls to server-memory, no moonbox', async () => fresh(await direct(), (x) => byCalls(x, ''))],
  ];
  const results = ways.map(() => []);
  for (const order of [[0, 1, 2], [2, 1, 0]]) {
    for (const i of order) results[i].push(await ways[i][1]());
  }
  for (let i = 0; i < ways.length; i++) {
    if (sorted(results[i][0].answer) !== sorted(results[0][0].answer))
      throw new Error(`different answers: ${sorted(results[i][0].answer)}`);
    const [r1, r2] = results[i];
    console.log(`| ${ways[i][0]} | ${r1.trips} | ${r1.bytes} | ${r1.ms.toFixed(0)} | ${r2.ms.toFixed(0)} |`);
  }
  console.log(`task: ${N} entities, ${N - 1} relations, read_graph, search_nodes; summary ${sorted(results[0][0].answer)} (${results[0][0].valueBytes} bytes; the rest of run_lua's result is the result contract)`);

  // per-call cost of one read-only call (search_nodes for a missing name: a small answer)
  const q = { query: 'nothing-matches' };
  const inLua = await (async () => {
    const k = 500;
    const code = `for i = 1, ${k} do tools.mem.search_nodes{query = "nothing-matches"} end return 0`;
    const t0 = performance.now();
    await a.callTool({ name: 'run_lua', arguments: { code } });
    return ((performance.now() - t0) * 1000) / k;
  })();
  const viaProxy = await perCall(() => b.callTool({ name: 'mem__search_nodes', arguments: q }));
  const straight = await perCall(() => c.callTool({ name: 'search_nodes', arguments: q }));
  const trivial = await perCall(() => a.callTool({ name: 'run_lua', arguments: { code: 'return 1' } }));
  console.log('\n| one search_nodes call | µs per call |');
  console.log('|---|---|');
  console.log(`| tools.mem.search_nodes inside run_lua (500 in one run, mean) | ${inLua.toFixed(0)} |`);
  console.log(`| mem__search_nodes through moonbox's proxy (median of 200) | ${viaProxy.toFixed(0)} |`);
  console.log(`| search_nodes straight to server-memory (median of 200) | ${straight.toFixed(0)} |`);
  console.log(`| run_lua "return 1", no upstream call (median of 200) | ${trivial.toFixed(0)} |`);
} finally {
  await a.close(), await b.close(), await c.close();
}
