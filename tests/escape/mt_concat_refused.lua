-- expect: runtime_error
-- error-contains: __concat
-- Attack: a __concat metamethod that reallocates the stack hits Debian's luaV_concat regression
-- (THREATS 0.1, 603b2c64).
local t = setmetatable({}, {__concat = function(a, b) return "x" end})
print("ESCAPED: setmetatable accepted __concat")
