-- expect: time_limit
-- accept: instruction_limit
-- limits: memory=64M time=2s
-- Attack: make each store into a watched metatable do as much C work as possible. 20,000
-- clones of one metatable (its __index replaced before each setmetatable, each clone kept
-- alive by its object), then an event key removed and added again in a loop: each addition
-- goes through the watch, which visits every clone (issue 26). The visits are charged to the
-- budget, so the count hook comes round as often as the work demands and the loop meets its
-- deadline instead of running between hooks unmetered.
local mt, objs = {}, {}
for i = 1, 20000 do
  mt.__index = {i}
  objs[i] = setmetatable({}, mt)
end
print("clones made")
local f = function() return true end
while true do
  mt.__eq = f
  mt.__eq = nil
end
