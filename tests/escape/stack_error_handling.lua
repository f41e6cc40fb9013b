-- expect: ok
-- accept: memory_limit
-- Attack: errors raised while handling errors and a stack overflow inside a message handler
-- (the overflowing handler may first exhaust the 64 MiB heap: memory_limit is fine):
-- CVE-2022-33099 (42d40581) and its neighbours (THREATS 5).
local ok, msg = xpcall(error, error)
assert(not ok)
local function f(x)
  if x == 0 then error("a\n") end
  local aux = function() return f(x - 1) end
  return xpcall(aux, aux)
end
f(3)
local function loop() return 1 + loop() end
local ok2 = xpcall(loop, loop)
assert(not ok2)
local ok3 = xpcall(loop, function(m) return loop() end)
assert(not ok3)
local function deep_handler(m) local ok4 = pcall(loop) return m end
assert(not xpcall(loop, deep_handler))
