-- expect: runtime_error
-- error-contains: '__concat' metamethods are not allowed
-- Attack: a __concat metamethod that reallocates the stack hits Debian's luaV_concat regression
-- (THREATS 0.1, 603b2c64). setmetatable accepts the metatable (the clone never holds the
-- guest's __concat); `..` reaching it raises, and the metamethod never runs.
local t = setmetatable({}, {__concat = function(a, b)
  print("ESCAPED: a guest __concat ran")
  local grow = {}
  for i = 1, 10000 do grow[i] = i end
  return "x"
end})
local s = t .. "y"
print("ESCAPED: concatenation returned " .. tostring(s))
