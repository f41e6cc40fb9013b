-- expect: memory_limit
-- limits: memory=16M time=30s
-- Attack: upstream's regression test for the luaV_finishset use-after-free (983bc433,
-- testes/events.lua), made to fire without its test library: a metatable that is itself
-- weak-valued holds the only reference to its __newindex table h, and one assignment through
-- it makes h's hash part double past the allocator's ceiling, so Lua's emergency collection
-- runs inside luaV_finishset and frees h mid-resize. On Debian's liblua5.4 with the guest's
-- table as the metatable (a minimal host with the same 21 MiB ceiling) this script aborted 4
-- of 5 runs with "free(): invalid size" and the fifth read a corrupted key ("table index is
-- nil"); with a strong metatable it runs to the end. Here the VM only uses
-- moonbox's strong clone, which holds h (SECURITY-MODEL row 4): the collection frees the
-- garbage, the allocation succeeds past the limit, and the run ends on the memory limit.
-- Sizes: h's hash part is 2^18 nodes (6 MiB), the garbage about 6 MiB; doubling h needs
-- 12 MiB more, past the 21 MiB ceiling until the garbage is freed.
local h = {}
local mt = setmetatable({__newindex = h}, {__mode = "v"})
local t = setmetatable({}, mt)
for i = 1, 1 << 18 do t[-i] = true end
collectgarbage()
local garbage = {}
for i = 1, 70000 do garbage[i] = {i} end
garbage, h = nil, nil -- from here only the weak metatable (and the clone) hold h
t[-(1 << 18) - 1] = true
for i = 1, 64 do t[{}] = i end
print("ESCAPED: the run went on past the memory limit")
