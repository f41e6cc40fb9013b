-- expect: runtime_error
-- error-contains: stack overflow
-- Attack: recursion through the string metatable's C arithmetic metamethods and through tostring:
-- each level is a C call (THREATS 1, D12).
local t
t = setmetatable({}, {__add = function(a, b) return "1" + t end})
local ok, e = pcall(function() return "1" + t end)
assert(not ok, "string arithmetic recursion did not fail")
local u
u = setmetatable({}, {__tostring = function(x) return tostring(x) end})
tostring(u)
print("ESCAPED: unbounded __tostring recursion returned")
