-- expect: ok
-- limits: memory=16M
-- Attack: stop the collector, then make garbage far past the memory limit. Stock Lua grows
-- without bound; moonbox's memory limit runs its own full collection before it ends a run
-- (lua_gc(LUA_GCCOLLECT) works while the collector is stopped), so garbage alone never
-- trips it, and the collector stays stopped.
collectgarbage("stop")
for i = 1, 200 do
  local t = {}
  for j = 1, 1000 do t[j] = {j} end -- about 80 KiB of garbage a round, 16 MiB in all
  local s = string.rep("g", 256 * 1024) .. i
end
assert(collectgarbage("isrunning") == false)
