-- expect: runtime_error
-- accept: memory_limit
-- limits: memory=64M time=10s
-- Attack: unbounded non-tail recursion grows the Lua stack until "stack overflow" (THREATS D12).
-- The time limit is generous on purpose: the point is the stack overflow, and building the
-- error's traceback over 500,000 levels once took 5.6 s on a loaded CI machine.
local function f(n) return 1 + f(n + 1) end
f(0)
print("ESCAPED: the recursion ended")
