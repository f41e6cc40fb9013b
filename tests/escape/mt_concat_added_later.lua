-- expect: ok
-- Attack: __concat added to the metatable after setmetatable, with a stack-growing body to hit
-- the luaV_concat stale pointer (THREATS 0.1, 603b2c64). It must never run, and the
-- concatenation must fail with the sandbox's clear refusal, not silently (issue 26).
local mt = {}
local t = setmetatable({}, mt)
mt.__concat = function(a, b)
  print("ESCAPED: a __concat added later ran")
  local function grow(n) if n > 0 then return grow(n - 1) + 1 end return 0 end
  grow(150)
  return "c"
end
local ok, err = pcall(function() return "a" .. "b" .. t .. "d" .. "e" end)
if ok then print("ESCAPED: concatenation with a table succeeded") end
if not tostring(err):find("'__concat' metamethods are not allowed", 1, true) then
  print("ESCAPED: no clear refusal: " .. tostring(err))
end
local ok2, err2 = pcall(function() return t .. t end)
if ok2 then print("ESCAPED: concatenation with a table succeeded") end
assert(tostring(err2):find("__concat", 1, true), err2)
-- Without a __concat, the stock error.
local plain = setmetatable({}, {})
local _, err3 = pcall(function() return "x" .. plain end)
assert(tostring(err3):find("attempt to concatenate a table value", 1, true), err3)
