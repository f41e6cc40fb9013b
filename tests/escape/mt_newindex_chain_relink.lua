-- expect: ok
-- limits: memory=64M instructions=1e8 time=3s
-- Attack: the chain bound checked where a metatable is set is only sound if no table
-- already in a chain can get deeper later (issue 9, B.2). Try every way to lengthen a
-- chain after the fact or to close a loop, for __index and __newindex: each must be
-- refused, and no lookup may follow more than 16 links.
local function refused(t, mt)
  return not pcall(setmetatable, t, mt)
end
for _, event in ipairs({"__index", "__newindex"}) do
  -- Top down: a table that is already a target cannot get a deeper metatable.
  local a, b, c = {}, {}, {}
  setmetatable(a, {[event] = b})
  if not refused(b, {[event] = c}) then print("ESCAPED: a target got deeper via", event) end
  -- A loop of two, and a table as its own target.
  if not refused(b, {[event] = a}) then print("ESCAPED: a loop of two via", event) end
  if not refused(c, {[event] = c}) then print("ESCAPED: a loop of one via", event) end
  -- Setting nil and back does not lose the pin.
  setmetatable(b, nil)
  if not refused(b, {[event] = c}) then print("ESCAPED: the pin was lost via", event) end
  -- Mixed links count together: __index into a table whose __newindex is a chain.
  local deep = {}
  for _ = 1, 15 do deep = setmetatable({}, {__index = deep}) end
  local mixed = setmetatable({}, {__newindex = deep})
  if not refused({}, {[event] = mixed}) then print("ESCAPED: a mixed chain of 17 via", event) end
  -- Changing the guest's own metatable after setmetatable is not seen (frozen clones).
  local mt = {[event] = {}}
  local x = setmetatable({}, mt)
  mt[event] = x
  if getmetatable(x) ~= mt then print("ESCAPED: getmetatable changed") end
end
-- A string __index goes through the string metatable: two links.
local s = setmetatable({}, {__index = "abc"})
assert(s.upper("a") == "A")
-- The usual class patterns still work, set up from the base class down.
local Base = {} Base.__index = Base
function Base.name() return "base" end
local Derived = setmetatable({}, Base) Derived.__index = Derived
local obj = setmetatable({}, Derived)
assert(obj.name() == "base" and getmetatable(obj) == Derived and getmetatable(Base) == nil)
return "refused"
