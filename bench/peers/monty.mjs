// bench/peers/monty.mjs -- Pydantic Monty's figures for the rows bench_peers measures for
// moonbox, through Monty's own napi binding (@pydantic/monty, installed by bench/peers.sh into
// a scratch folder). Prints one line per row: "row NAME VALUE UNIT". Never a test.
// Usage: node --expose-gc monty.mjs [ITERS]
import { Monty, MontyRepl, MontySnapshot } from '@pydantic/monty'
import fs from 'fs'
import path from 'path'
import { fileURLToPath } from 'url'

const here = path.dirname(fileURLToPath(import.meta.url))
const iters = Number(process.argv[2] || 20000)
const HOST_CALLS = 1000

function median(fn, n) {
  for (let i = 0; i < n / 10 + 1; i++) fn() // warm-up, untimed
  const samples = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint()
    fn()
    samples[i] = Number(process.hrtime.bigint() - t0) / 1e3
  }
  samples.sort()
  return samples[n >> 1]
}

function row(name, value, unit) {
  console.log(`row ${name} ${value.toFixed(unit === 'B' ? 0 : 3)} ${unit}`)
}

function check(got, want, what) {
  if (got !== want) throw new Error(`${what}: got ${got}, want ${want}`)
}

// A fresh interpreter for "1 + 1" (parse + run); "1 + 1" parsed once and run again (Monty's
// fastest repeated run: moonbox's live sandbox row); a REPL's feed, whose cost grows with the
// session's history (1,000 feeds in, one costs ~0.3 ms), so only its first 200 feeds count.
check(new Monty('1 + 1').run(), 2, 'fresh')
row('fresh_1p1', median(() => new Monty('1 + 1').run(), iters), 'us')
const parsed = new Monty('1 + 1')
row('live_1p1', median(() => parsed.run(), iters), 'us')
const repl = new MontyRepl()
check(repl.feed('1 + 1'), 2, 'repl')
row('repl_feed_1p1', median(() => repl.feed('1 + 1'), 180), 'us')

// A sync host call: one run of HOST_CALLS calls of add(i, 3), per call.
const loop = new Monty(`s = 0\nfor i in range(${HOST_CALLS}):\n    s = s + add(i, 3)\ns`)
const fns = { externalFunctions: { add: (a, b) => a + b } }
check(loop.run(fns), (HOST_CALLS * (HOST_CALLS - 1)) / 2 + 3 * HOST_CALLS, 'host call')
row('host_call', (median(() => loop.run(fns), iters / 100) * 1e3) / HOST_CALLS, 'ns')

// The 40-record snippet (bench/snippet.lua in Python), parsed once, run on fresh state.
const snippet = new Monty(fs.readFileSync(path.join(here, 'snippet.py'), 'utf8'),
                          { inputs: ['records'] })
const records = JSON.parse(fs.readFileSync(path.join(here, 'records.json'), 'utf8')).records
const inputs = { inputs: { records } }
console.log(`digest ${snippet.run(inputs).get('digest')}`)
row('snippet', median(() => snippet.run(inputs), iters / 10), 'us')

// Idle sessions: 1,000 REPLs that each ran one statement, resident bytes per REPL.
function rss() { global.gc && global.gc(); return process.memoryUsage().rss }
const before = rss()
const idle = []
for (let i = 0; i < 1000; i++) { const r = new MontyRepl(); r.feed('x = 1'); idle.push(r) }
row('idle_session', (rss() - before) / 1000, 'B')
check(idle[999].feed('x'), 1, 'idle')

// A snapshot after 100 host calls: paused at the 101st, its size and its restore.
let progress = new Monty('for i in range(100):\n    add(i, 3)\ndone()').start()
while (progress instanceof MontySnapshot && progress.functionName === 'add')
  progress = progress.resume({ returnValue: 0 })
check(progress.functionName, 'done', 'snapshot')
const blob = progress.dump()
row('snapshot_bytes', blob.length, 'B')
row('snapshot_restore', median(() => MontySnapshot.load(blob), iters / 10), 'us')
