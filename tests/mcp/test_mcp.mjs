// tests/mcp/test_mcp.mjs -- `moonbox mcp` against a real client: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned by package-lock.json) over its stdio transport, plus raw
// writes to the server's stdin for what no SDK would send. The SDK checks every structured
// result against the tool's outputSchema (docs/result.schema.json) and throws if it does not
// validate, so each callTool here is also a schema test.
// Run by tests/mcp/run.sh (ctest mcp/sdk): node test_mcp.mjs /path/to/moonbox
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import test from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

const moonbox = process.argv[2];
if (!moonbox) throw new Error('usage: node test_mcp.mjs /path/to/moonbox');
// Server caps: the client may lower them, never raise them.
const serverArgs = ['mcp', '--timeout', '4s', '--memory', '32M', '--output-limit', '64k'];

async function connect() {
  const transport = new StdioClientTransport({ command: moonbox, args: serverArgs, stderr: 'pipe' });
  const client = new Client({ name: 'moonbox-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

const run = (client, args, options) =>
  client.callTool({ name: 'run_lua', arguments: args }, undefined, options);
const text = (result) => result.content[0].text;

test('handshake and tools/list', async () => {
  const client = await connect();
  try {
    assert.equal(LATEST_PROTOCOL_VERSION, '2025-11-25');
    assert.equal(client.getServerVersion().name, 'moonbox');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['run_lua', 'check_lua', 'reset_session', 'close_session']);
    const runLua = tools[0];
    assert.deepEqual(runLua.inputSchema.required, ['code']);
    assert.equal(runLua.outputSchema.$id, 'urn:moonbox:schema:result:1');
    await client.ping();
  } finally {
    await client.close();
  }
});

test('run_lua: results of every kind validate against the outputSchema', async () => {
  const client = await connect();
  try {
    await client.listTools(); // the SDK compiles the outputSchema validators here
    let r = await run(client, { code: 'return 1 + 1' });
    assert.equal(r.isError, false);
    assert.equal(r.structuredContent.status, 'ok');
    assert.equal(r.structuredContent.value, 2);
    assert.deepEqual(JSON.parse(text(r)), r.structuredContent);

    r = await run(client, {
      code: 'print("rows", #io.open("/input/data.csv"):read("a")) return n + 1, "\\255", {a = {1, 2}}',
      inputs: { n: 41 },
      files: { '/input/data.csv': 'a,b\n1,2\n', '/input/raw.bin': { $bytes: 'AAEC' } },
    });
    assert.equal(r.structuredContent.status, 'ok');
    assert.deepEqual(r.structuredContent.value, [42, { $bytes: '/w==' }, { a: [1, 2] }]);
    assert.equal(r.structuredContent.stdout, 'rows\t8\n');

    r = await run(client, { code: 'io.write("\\200")' });
    assert.deepEqual(r.structuredContent.stdout, { $bytes: 'yA==' }); // byte 200

    const failing = [
      ['return +', 'syntax_error'],
      ['error("boom")', 'runtime_error'],
      ['local t = {} for i = 1, 1e8 do t[i] = i end', 'memory_limit', { memory: 1 << 20 }],
      ['while true do end', 'instruction_limit', { instructions: 100000 }],
      ['while true do end', 'time_limit', { timeout_ms: 200 }],
      ['while true do io.write(("x"):rep(100)) end', 'output_limit'],
    ];
    for (const [code, status, limits] of failing) {
      r = await run(client, limits ? { code, limits } : { code });
      assert.equal(r.isError, true, code);
      assert.equal(r.structuredContent.status, status, code);
      assert.equal(typeof r.structuredContent.error.message, 'string');
    }
  } finally {
    await client.close();
  }
});

test('check_lua: ungranted globals with lines, syntax errors, declared inputs', async () => {
  const client = await connect();
  try {
    await client.listTools();
    let r = await client.callTool({
      name: 'check_lua',
      arguments: { code: 'local n = #items\nresult = http.get(url)\nreturn string.upper(n)', inputs: { items: [] } },
    });
    assert.equal(r.isError, false);
    assert.deepEqual(r.structuredContent, {
      globals: [
        { access: 'read', line: 2, name: 'http' },
        { access: 'write', line: 2, name: 'result' },
        { access: 'read', line: 2, name: 'url' },
      ],
      ok: false,
      syntax_error: null,
    });
    r = await client.callTool({ name: 'check_lua', arguments: { code: 'for i = 1 do end' } });
    assert.equal(r.structuredContent.ok, false);
    assert.equal(r.structuredContent.syntax_error.line, 1);
    r = await client.callTool({ name: 'check_lua', arguments: { code: 'return math.pi * r', inputs: { r: 2 } } });
    assert.equal(r.structuredContent.ok, true);
  } finally {
    await client.close();
  }
});

test('errors: unknown tool, bad arguments, raised limits', async () => {
  const client = await connect();
  try {
    await assert.rejects(
      client.callTool({ name: 'rm_rf', arguments: {} }),
      (e) => e.code === -32602 && /unknown tool 'rm_rf'/.test(e.message),
    );
    let r = await run(client, { code: 'return 1', limits: { timeout_ms: 60000 } });
    assert.equal(r.isError, true);
    assert.match(text(r), /above the server's cap of 4000/);
    r = await run(client, { code: 'return 1', limits: { memory: 1 << 30 } });
    assert.match(text(r), /limits\.memory/);
    r = await run(client, { code: 'return 1', inputs: { print: 1 } });
    assert.match(text(r), /invalid_input/);
    r = await run(client, { code: 'return 1', mounts: ['/'] });
    assert.match(text(r), /unknown argument 'mounts'/);
    r = await client.callTool({ name: 'run_lua', arguments: {} });
    assert.match(text(r), /code/);
    await client.ping(); // still serving
  } finally {
    await client.close();
  }
});

test('session across calls, rewound after a timeout, reset and closed', async () => {
  const client = await connect();
  try {
    await client.listTools();
    let r = await run(client, { session: 'nb', code: 'x = 41', limits: { timeout_ms: 400 } });
    assert.equal(r.structuredContent.session.created, true);
    r = await run(client, { session: 'nb', code: 'x = x + 1 return x' });
    assert.equal(r.structuredContent.value, 42);
    r = await run(client, { session: 'nb', code: 'x = 0 while true do end' });
    assert.equal(r.structuredContent.status, 'time_limit');
    // Rewound to before the call; where checkpoints are unsupported (the asan build's malloc
    // heap) reset instead, and the result says which.
    const { rewound, reset } = r.structuredContent.session;
    assert.ok(rewound !== reset);
    if (!process.env.MBX_NO_CHECKPOINTS) assert.equal(rewound, true);
    r = await run(client, { session: 'nb', code: 'return x' });
    assert.equal(r.structuredContent.value, rewound ? 42 : null); // survived the timeout
    r = await client.callTool({ name: 'reset_session', arguments: { session: 'nb' } });
    assert.deepEqual(r.structuredContent, { session: 'nb', status: 'reset' });
    r = await run(client, { session: 'nb', code: 'return x' });
    assert.equal(r.structuredContent.value, null);
    r = await client.callTool({ name: 'close_session', arguments: { session: 'nb' } });
    assert.equal(r.structuredContent.status, 'closed');
    r = await client.callTool({ name: 'close_session', arguments: { session: 'nb' } });
    assert.equal(r.isError, true);
    assert.match(text(r), /no session 'nb'/);
  } finally {
    await client.close();
  }
});

test('a cancelled run is interrupted, its session rewound, and ping never stalls', async () => {
  const client = await connect();
  try {
    await run(client, { session: 'c', code: 'y = 5' });
    const controller = new AbortController();
    const started = Date.now();
    const long = run(client, { session: 'c', code: 'y = 6 while true do end' }, { signal: controller.signal });
    // While it runs: ping and another call are answered.
    await client.ping();
    const other = await run(client, { code: 'return "meanwhile"' });
    assert.equal(other.structuredContent.value, 'meanwhile');
    // A second call on the busy session is refused with a clear result.
    const busy = await run(client, { session: 'c', code: 'return 1' });
    assert.equal(busy.isError, true);
    assert.match(text(busy), /session busy/);
    controller.abort('test cancel');
    await assert.rejects(long);
    // The server got notifications/cancelled and interrupted the run well before its 4 s limit
    // would have ended it (generous: the machine is loaded); the session was rewound.
    let r;
    for (let i = 0; i < 200; i++) {
      r = await run(client, { session: 'c', code: 'return y' });
      if (!r.isError) break;
      await new Promise((ok) => setTimeout(ok, 20));
    }
    assert.equal(r.structuredContent.value, process.env.MBX_NO_CHECKPOINTS ? null : 5);
    assert.ok(Date.now() - started < 3900, `the cancel took ${Date.now() - started} ms`);
  } finally {
    await client.close();
  }
});

test('progress notifications for a long run', async () => {
  const client = await connect();
  try {
    const seen = [];
    const r = await run(
      client,
      { code: 'while true do end', limits: { timeout_ms: 2500 } },
      { onprogress: (p) => seen.push(p.progress) },
    );
    assert.equal(r.structuredContent.status, 'time_limit');
    assert.ok(seen.length >= 1, 'no progress notification');
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1]);
    assert.ok(seen[0] >= 900);
  } finally {
    await client.close();
  }
});

// The same schema describes `moonbox run --json` (one contract, written once), and it is not a
// schema that accepts anything: broken results fail it.
test('docs/result.schema.json: the CLI\'s --json results validate, broken ones do not', async (t) => {
  const schemaPath = process.env.MBX_RESULT_SCHEMA;
  if (!schemaPath) return t.skip('MBX_RESULT_SCHEMA not set');
  const validate = new AjvJsonSchemaValidator().getValidator(JSON.parse(readFileSync(schemaPath, 'utf8')));
  const scripts = [
    ['return 1, "\\255", {x = {1, 2}}'],
    ['error({code = 1})'],
    ['return +'],
    ['while true do end', '--timeout', '100ms'],
    ['os.exit(3)'],
    ['io.stderr:write("\\200") return nil'],
    // Values JSON cannot hold are described, never an error (a module file run as a program).
    ['local M = {} M.__index = M function M.f() end return M, print, 0/0, coroutine.create(print), io.stdout'],
  ];
  for (const [code, ...flags] of scripts) {
    const r = spawnSync(moonbox, ['run', '--json', ...flags, '-e', code], { encoding: 'utf8' });
    const result = JSON.parse(r.stdout);
    assert.equal(validate(result).valid, true, `${code}: ${validate(result).errorMessage}`);
  }
  const ok = JSON.parse(spawnSync(moonbox, ['run', '--json', '-e', 'return 1'], { encoding: 'utf8' }).stdout);
  const broken = [
    { ...ok, status: 'fine' },
    { ...ok, error: { chunk: 'input', line: 1, message: 'x', traceback: '' } }, // ok with an error
    { ...ok, status: 'time_limit' }, // a limit without an error
    { ...ok, stdout: { $bytes: '***' } },
    { ...ok, usage: { ...ok.usage, wall_us: -1 } },
    { ...ok, value: { $bytes: 'AA==', extra: 1 }, pending: { args: [], function: '' } },
    { ...ok, surprise: true },
    { ...ok, value: { $function: 1 } },
    { ...ok, value: { $number: 'NaN' } },
    { ...ok, value: { $thread: 'running' } },
    { ...ok, value: { $cycle: 'elsewhere' } },
  ];
  for (const b of broken) assert.equal(validate(b).valid, false, JSON.stringify(b));
});

// ---- raw stdin: what a client library would never send ----

function rawServer() {
  const child = spawn(moonbox, serverArgs, { stdio: ['pipe', 'pipe', 'pipe'] });
  let buffer = '';
  const waiting = [];
  const lines = [];
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buffer.slice(0, nl))); // every line must be one JSON message
      buffer = buffer.slice(nl + 1);
      while (waiting.length && lines.length) waiting.shift()(lines.shift());
    }
  });
  return {
    child,
    send: (data) => child.stdin.write(data),
    next: () =>
      new Promise((ok, fail) => {
        if (lines.length) return ok(lines.shift());
        const timer = setTimeout(() => fail(new Error('no reply within 60 s')), 60000);
        waiting.push((m) => (clearTimeout(timer), ok(m)));
      }),
  };
}

const req = (id, method, params) => JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n';

test('hostile input on stdin gets error replies, and the server keeps serving', async () => {
  const s = rawServer();
  try {
    s.send(req(1, 'tools/call', { name: 'run_lua', arguments: { code: 'return 1' } }));
    let m = await s.next();
    assert.equal(m.error.code, -32600);
    assert.match(m.error.message, /initialize first/);

    s.send(req(2, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } }));
    m = await s.next();
    assert.equal(m.result.protocolVersion, '2025-11-25');
    s.send('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');

    s.send('{"jsonrpc":"2.0","id":3,"method":\n');
    m = await s.next();
    assert.deepEqual([m.id, m.error.code], [null, -32700]);

    s.send(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":4,"method":"pi'), Buffer.from([0xff, 0xc0]), Buffer.from('ng"}\n')]));
    m = await s.next();
    assert.equal(m.error.code, -32700);

    s.send('['.repeat(200000) + ']'.repeat(200000) + '\n');
    m = await s.next();
    assert.equal(m.error.code, -32700);

    s.send('[' + req(5, 'ping').trim() + ']\n');
    m = await s.next();
    assert.deepEqual([m.id, m.error.code], [null, -32600]);

    s.send(req(6, 'no/such/method'));
    m = await s.next();
    assert.deepEqual([m.id, m.error.code], [6, -32601]);

    // A 70 MiB line: refused whole, without holding more than the 64 MiB cap.
    const huge = '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"' + 'x'.repeat(70 << 20) + '"}}\n';
    s.send(huge);
    m = await s.next();
    assert.equal(m.error.code, -32700);
    assert.match(m.error.message, /too large/);

    // A reused id while the first call still runs.
    s.send(req(8, 'tools/call', { name: 'run_lua', arguments: { code: 'while true do end', limits: { timeout_ms: 1500 } } }));
    s.send(req(8, 'tools/call', { name: 'run_lua', arguments: { code: 'return 1' } }));
    m = await s.next();
    assert.deepEqual([m.id, m.error.code], [8, -32600]);
    assert.match(m.error.message, /already in use/);
    m = await s.next();
    assert.equal(m.id, 8);
    assert.equal(m.result.structuredContent.status, 'time_limit');

    // Thousands of sessions: the cap answers each one past it, and says so.
    for (let i = 0; i < 2000; i++) s.send(req(100 + i, 'tools/call', { name: 'run_lua', arguments: { session: `s${i}`, code: 'return 1' } }));
    let refused = 0;
    for (let i = 0; i < 2000; i++) {
      m = await s.next();
      if (m.result.isError) {
        // The cap, or (while 16 calls run) the concurrency cap: both say why.
        assert.match(m.result.content[0].text, /too many sessions|server busy/);
        refused++;
      }
    }
    assert.ok(refused >= 2000 - 32);

    s.send(req(9, 'ping'));
    m = await s.next();
    assert.deepEqual(m, { jsonrpc: '2.0', id: 9, result: {} });
  } finally {
    s.child.stdin.end();
    await new Promise((ok) => s.child.on('exit', ok));
  }
});

// The processes below pid (from /proc/*/stat: "pid (comm) state ppid ..."), with their names and
// resident bytes.
function descendants(root) {
  const procs = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const ppid = Number(stat.slice(close + 2).split(' ')[1]);
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${name}/status`, 'utf8'));
      procs.push({ pid: Number(name), ppid, comm, rss: rss ? Number(rss[1]) * 1024 : 0 });
    } catch {
      // it ended meanwhile
    }
  }
  const below = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of procs) if (below.has(p.ppid) && !below.has(p.pid)) { below.add(p.pid); grew = true; }
  }
  return procs.filter((p) => p.pid !== root && below.has(p.pid));
}

async function serverWith(args) {
  const transport = new StdioClientTransport({ command: moonbox, args, stderr: 'pipe' });
  let log = '';
  transport.stderr.on('data', (d) => { log += d; });
  const client = new Client({ name: 'moonbox-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, pid: transport.pid, log: () => log };
}

// `moonbox mcp` runs each call in a jailed worker by default: a session's heap (an 8 MiB string
// held in a global) is resident in a moonbox-worker process below the server, not in the server.
// With --isolate none there is no worker at all.
test('run_lua runs in a worker process by default; --isolate none opts out', async () => {
  const big = 'big = string.rep("x", 8 << 20) return #big';
  const isolated = await serverWith(serverArgs);
  try {
    const r = await run(isolated.client, { code: big, session: 'heap' });
    assert.equal(r.structuredContent.value, 8 << 20);
    // One worker holds 8 MiB more than the leanest (the zygote and the warm workers; under
    // ASan every worker starts with megabytes of its own).
    const holders = () => {
      const workers = descendants(isolated.pid).filter((p) => p.comm === 'moonbox-worker');
      const base = Math.min(...workers.map((p) => p.rss));
      return [workers.filter((p) => p.rss >= base + (7 << 20)), workers];
    };
    const [holder, workers] = holders();
    assert.ok(workers.length >= 2, `no zygote and worker below the server: ${JSON.stringify(workers)}`);
    assert.equal(holder.length, 1, `one worker holds the session's 8 MiB: ${JSON.stringify(workers)}`);
    assert.match(isolated.log(), /each call in a jailed worker process/);
    // Many calls through the warm pool: each a fresh sandbox, all answered.
    for (let i = 0; i < 20; i++) assert.equal((await run(isolated.client, { code: `return ${i} * 2` })).structuredContent.value, i * 2);
    await isolated.client.callTool({ name: 'close_session', arguments: { session: 'heap' } });
    let left = [];
    for (let tries = 0; tries < 100; tries++) {
      left = holders()[0];
      if (left.length === 0) break;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    assert.deepEqual(left, [], 'the closed session\'s worker is gone');
  } finally {
    await isolated.client.close();
  }
  const local = await serverWith([...serverArgs, '--isolate', 'none']);
  try {
    const r = await run(local.client, { code: big, session: 'heap' });
    assert.equal(r.structuredContent.value, 8 << 20);
    assert.deepEqual(descendants(local.pid).filter((p) => p.comm === 'moonbox-worker'), []);
    assert.match(local.log(), /the calls in this process \(--isolate none\)/);
  } finally {
    await local.client.close();
  }
});

// --hibernate-after (with --isolate none): a session left idle goes out of memory -- the
// server's resident memory drops by the 8 MiB string the session holds -- and its next call
// wakes it with every global as it was (integers, doubles and string.pack bytes that look like
// heap addresses: nothing is relocated), and says so in session.woke. The asan build has no
// arena to hibernate (MBX_NO_CHECKPOINTS).
const rssOf = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
test('--hibernate-after: an idle session leaves memory and wakes intact', {
  skip: process.env.MBX_NO_CHECKPOINTS ? 'this build has no arena: sessions cannot hibernate' : false,
}, async () => {
  const s = await serverWith([...serverArgs, '--isolate', 'none', '--hibernate-after', '200ms']);
  try {
    const set = 'big = string.rep("x", 8 << 20) p = 0x7f3a12345678 d = 3.0e-310 '
      + 'b = string.pack("<j d s4", 0x7ffd00001000, 2.5e-320, "heap") return #big';
    let r = await run(s.client, { code: set, session: 'nb' });
    assert.equal(r.structuredContent.value, 8 << 20);
    assert.equal(r.structuredContent.session.woke, false);
    assert.match(s.log(), /sessions idle for 200 ms hibernated/);
    const awake = rssOf(s.pid);
    let asleep = awake;
    // The monitor looks every 100 ms; wait generously (30 s) for the 8 MiB to go.
    for (let i = 0; i < 300 && awake - asleep < (6 << 20); i++) {
      await new Promise((ok) => setTimeout(ok, 100));
      asleep = rssOf(s.pid);
    }
    assert.ok(awake - asleep >= (6 << 20), `RSS ${awake} -> ${asleep}: the session's heap was not released`);
    r = await run(s.client, {
      code: 'return #big == 8 << 20 and big:sub(-3) == "xxx" and p == 0x7f3a12345678 and d == 3.0e-310 '
        + 'and b == string.pack("<j d s4", 0x7ffd00001000, 2.5e-320, "heap")',
      session: 'nb',
    });
    assert.equal(r.structuredContent.value, true);
    assert.equal(r.structuredContent.session.woke, true);
  } finally {
    await s.client.close();
  }
});
