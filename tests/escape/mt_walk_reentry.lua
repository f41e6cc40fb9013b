-- expect: ok
-- limits: memory=64M instructions=1e8 time=30s
-- Attack: the C walker that follows __index/__newindex chains the VM may not (loops, deep
-- chains, an __index added after setmetatable) re-enters Lua: through __index functions it
-- meets, which can mutate the very chain being walked, yield across it, and recurse through
-- other walked chains until the C stack runs out (issue 26). Each must keep stock results or
-- raise a catchable error: no crash, no hang, no value from a freed table.
local function deep_chain(n, bottom)
  local t = bottom
  for _ = 1, n do t = setmetatable({}, {__index = t, __newindex = t}) end
  return t
end
-- Mutation during dispatch: the __index function at the bottom of a walked chain unlinks
-- and relinks the chain, drops every other reference to it and collects.
local bottom = {}
local chain = deep_chain(40, bottom)
setmetatable(bottom, {__index = function(t, k)
  for _ = 1, 3 do
    setmetatable(bottom, nil)
    collectgarbage()
    setmetatable(bottom, {__index = function() return "relinked" end})
  end
  return "first:" .. k
end})
assert(chain.x == "first:x", chain.x)
assert(chain.y == "relinked")
-- A yield from inside a walked lookup, and a resume much later.
local co = coroutine.wrap(function()
  local t = deep_chain(30, setmetatable({}, {__index = function(_, k) return coroutine.yield(k) end}))
  return t.key .. "+" .. t.other
end)
assert(co() == "key")
assert(co("a") == "other")
assert(co("b") == "a+b")
-- Recursion through walked chains: each __index call looks up through another walked chain.
local depth = 0
local rec = {}
local top = deep_chain(20, rec)
setmetatable(rec, {__index = function(_, k)
  depth = depth + 1
  return top[k]
end})
local ok, err = pcall(function() return top.anything end)
if ok then print("ESCAPED: unbounded recursion returned") end
assert(tostring(err):find("overflow", 1, true), tostring(err))
-- An __index added after setmetatable, then replaced by a loop.
local mt = {}
local o = setmetatable({}, mt)
mt.__index = mt
mt.v = 1
assert(o.v == 1 and o.none == nil)
setmetatable(mt, mt)
local ok2, err2 = pcall(function() return o.none end)
assert(not ok2 and err2:find("chain too long", 1, true), err2)
return depth > 0
