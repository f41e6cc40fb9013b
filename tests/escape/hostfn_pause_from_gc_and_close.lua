-- expect: paused
-- host-functions: on
-- Attack: pause from places that must refuse (a sort comparator), then from a __close
-- handler on normal block exit, which Lua 5.4 can suspend: the run must pause cleanly.
local ok, e = pcall(table.sort, {3, 2, 1}, function(a, b) host.fetch() return a < b end)
assert(not ok and e:find("cannot pause here", 1, true), tostring(e))
-- __gc is accepted and never runs, so it cannot pause either.
setmetatable({}, {__gc = function() host.fetch("from gc") end})
collectgarbage()
do
  local x <close> = setmetatable({}, {__close = function() host.fetch("from close") end})
end
print("ESCAPED: the pause did not happen")
