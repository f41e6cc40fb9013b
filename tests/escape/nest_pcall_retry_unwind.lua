-- expect: time_limit
-- accept: memory_limit
-- limits: memory=4M instructions=0 time=50ms
-- Attack: pcall nesting with no base case, each level retrying forever (THREATS D6 and 9).
-- Found by tests/fuzz/fuzz_run.c (docs/fuzzing.md, finding F1).
-- In a coroutine, guest pcall nests far deeper than stock's main-thread bound of about 200.
-- Once the deadline trips, each level's catch makes Lua walk the whole CallInfo chain.
-- Unwinding is therefore quadratic and unmetered: seconds past the deadline at 64 MiB.
local function layer()
  while true do pcall(layer) end
end
layer()
