-- expect: runtime_error
-- limits: memory=64M instructions=1e8 time=3s
-- error-contains: '__call' must be a function
-- Attack: a table whose __call is itself makes Lua retry the __call lookup without bound
-- inside one OP_CALL, shifting a growing argument list: no hook fires (issue 9, B.1;
-- 312 s for a 3 s limit before the fix, stock Lua hangs the same way).
local t = {}
setmetatable(t, {__call = t})
t()
print("ESCAPED: the call returned")
