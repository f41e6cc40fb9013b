-- expect: memory_limit
-- limits: memory=16M time=30s
-- Attack: mt_weak_metatable_finishset (upstream's 983bc433 regression test made to fire)
-- with everything added after setmetatable, so through the watch (issue 26): the __newindex
-- table h is added to mt once t uses it, then mt itself is made weak-valued, so that only the
-- weak mt would hold h when an assignment makes h's hash part double past the allocator's
-- ceiling. The watch passed h on to t's clone as the walker with h kept strongly in the clone,
-- and the walker stores into h from its own stack: the collection frees the garbage only, and
-- the run ends on the memory limit. If the clone held h weakly, or the VM used the weak mt,
-- the emergency collection would free h mid-resize.
local h = {}
local mt = {}
local t = setmetatable({}, mt)
mt.__newindex = h
setmetatable(mt, {__mode = "v"})
for i = 1, 1 << 18 do t[-i] = true end
if rawget(t, -1) ~= nil then print("ESCAPED: the __newindex added later was ignored") end
collectgarbage()
local garbage = {}
for i = 1, 70000 do garbage[i] = {i} end
garbage, h = nil, nil -- from here only the weak metatable (and the clone) hold h
t[-(1 << 18) - 1] = true
for i = 1, 64 do t[{}] = i end
print("ESCAPED: the run went on past the memory limit")
