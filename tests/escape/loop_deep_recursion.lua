-- expect: runtime_error
-- accept: memory_limit
-- limits: memory=64M
-- Attack: unbounded non-tail recursion grows the Lua stack until "stack overflow" (THREATS D12).
local function f(n) return 1 + f(n + 1) end
f(0)
print("ESCAPED: the recursion ended")
