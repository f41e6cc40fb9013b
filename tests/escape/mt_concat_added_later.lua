-- expect: ok
-- Attack: __concat added to the metatable after setmetatable, with a stack-growing body to hit
-- the luaV_concat stale pointer (THREATS 0.1, 8.4: frozen metatables).
local mt = {}
local t = setmetatable({}, mt)
mt.__concat = function(a, b)
  print("ESCAPED: a __concat added later ran")
  local function grow(n) if n > 0 then return grow(n - 1) + 1 end return 0 end
  grow(150)
  return "c"
end
local ok = pcall(function() return "a" .. "b" .. t .. "d" .. "e" end)
if ok then print("ESCAPED: concatenation with a table succeeded") end
local ok2 = pcall(function() return t .. t end)
if ok2 then print("ESCAPED: concatenation with a table succeeded") end
