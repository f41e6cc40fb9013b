// bench/peers/codemode/utcp.mjs -- the code-mode peer of bench/bench_code_mode.mjs: the same
// task against the official memory server (create N entities with observations, relate them in
// a chain, read the graph, search, summarize), written in JavaScript for @utcp/code-mode, which
// runs it in an isolated-vm isolate whose tool functions reach server-memory through @utcp/mcp
// (stdio). Then the per-call cost of one tool call inside a chain, and a chain that calls
// nothing. Prints markdown rows; bench/bench_code_mode.sh runs it right after moonbox's rows.
// Usage: node utcp.mjs SERVER_MEMORY_JS [N]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { CodeModeUtcpClient } from '@utcp/code-mode';
import '@utcp/mcp';

const server = process.argv[2];
const N = Number(process.argv[3] || 100);
if (!server) throw new Error('usage: node utcp.mjs SERVER_MEMORY_JS [N]');
const dir = mkdtempSync(join(tmpdir(), 'moonbox-bench-utcp-'));
let fileNo = 0;
const quiet = console.log;
console.log = () => {}; // the library logs every call on stdout
console.error = () => {};

async function client() {
  const c = await CodeModeUtcpClient.create(dir, null);
  await c.registerManual({
    name: 'mem', call_template_type: 'mcp',
    config: { mcpServers: { memory: { transport: 'stdio', command: 'node', args: [server],
      env: { MEMORY_FILE_PATH: join(dir, `memory-${fileNo++}.jsonl`) } } } },
  });
  return c;
}

const task = `
for (let i = 1; i <= ${N}; i++)
  mem.memory_create_entities({entities: [{name: 'e' + i, entityType: i % 3 ? 'person' : 'place',
    observations: ['score ' + (i % 7), 'group ' + (i % 5)]}]});
for (let i = 1; i < ${N}; i++)
  mem.memory_create_relations({relations: [{from: 'e' + i, to: 'e' + (i + 1), relationType: 'next'}]});
const graph = mem.memory_read_graph({});
const found = mem.memory_search_nodes({query: 'group 3'});
let people = 0, score = 0;
for (const e of graph.entities) {
  if (e.entityType === 'person') people++;
  score += Number(e.observations[0].split(' ')[1]);
}
return {entities: graph.entities.length, relations: graph.relations.length, people, score,
  group3: found.entities.length};`;

async function chain(c, code) {
  const t0 = performance.now();
  const r = await c.callToolChain(code, 120000);
  const ms = performance.now() - t0;
  if (r.result === null || r.result === undefined) throw new Error(`the chain failed: ${r.logs.join(' ')}`);
  return { ms, r };
}

const rounds = [];
for (let k = 0; k < 2; k++) {
  const c = await client(); // a server of its own each round (empty memory)
  rounds.push(await chain(c, task));
}
const answer = JSON.stringify(rounds[0].r.result, Object.keys(rounds[0].r.result).sort());
const c = await client();
const k = 500;
const calls = await chain(c, `for (let i = 0; i < ${k}; i++) mem.memory_search_nodes({query: 'nothing-matches'}); return 0;`);
const empty = [];
for (let i = 0; i < 50; i++) empty.push((await chain(c, 'return 1')).ms * 1000);
empty.sort((a, b) => a - b);
quiet(`| @utcp/code-mode: one callToolChain (isolated-vm, mem.memory_*) | 1 | - | ${rounds[0].ms.toFixed(0)} | ${rounds[1].ms.toFixed(0)} |`);
quiet(`answer ${answer}`);
quiet(`| mem.memory_search_nodes inside @utcp/code-mode's callToolChain (500 in one chain, mean) | ${(calls.ms * 1000 / k).toFixed(0)} |`);
quiet(`| @utcp/code-mode callToolChain "return 1", no tool call (median of 50) | ${empty[25].toFixed(0)} |`);
// process.exit hangs here at times (isolated-vm 5 tearing isolates down under node 20); stdout
// is a pipe, written synchronously, so nothing is lost. The memory servers see their stdin end.
process.kill(process.pid, 'SIGKILL');
