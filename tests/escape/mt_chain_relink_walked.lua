-- expect: ok
-- limits: memory=64M instructions=1e8 time=30s
-- Attack: chains lengthened after the fact and loops closed through tables that are already
-- in a chain, for __index and __newindex (issue 9, B.2): the VM may follow at most 16 links
-- per instruction, so a table that gets deeper after it was linked, a loop of two and a table
-- as its own target must be walked in metered C (issue 26), with stock's results: values
-- found through the deeper chain, and stock's "chain too long; possible loop" for loops.
local function loops(f)
  local ok, e = pcall(f)
  return not ok and tostring(e):find("chain too long; possible loop", 1, true) ~= nil
end
local function probe(t, event)
  if event == "__index" then return t.missing end
  t.missing = 1
end
for _, event in ipairs({"__index", "__newindex"}) do
  -- Top down: a table that is already a target gets a deeper metatable.
  local a, b, c = {}, {}, {}
  setmetatable(a, {[event] = b})
  setmetatable(b, {[event] = c})
  -- A loop of two, and a table as its own target.
  setmetatable(c, {[event] = a})
  if not loops(function() return probe(a, event) end) then print("ESCAPED: no loop error", event) end
  local d = {}
  setmetatable(d, {[event] = d})
  if not loops(function() return probe(d, event) end) then print("ESCAPED: no loop error", event) end
  -- Setting nil and back.
  setmetatable(c, nil)
  setmetatable(c, {[event] = setmetatable({}, {[event] = {}})})
  probe(a, event)
  -- Mixed links: __index into a table whose __newindex is a chain, 15 deep and more.
  local deep = {}
  for _ = 1, 40 do deep = setmetatable({}, {__index = deep, __newindex = deep}) end
  local mixed = setmetatable({}, {__newindex = deep, __index = deep})
  local top = setmetatable({}, {[event] = mixed})
  probe(top, event)
  -- Changing the guest's own metatable after setmetatable.
  local mt = {[event] = {}}
  local x = setmetatable({}, mt)
  mt[event] = x
  if getmetatable(x) ~= mt then print("ESCAPED: getmetatable changed") end
  pcall(probe, x, event)
end
-- A deeper base found through a walked chain.
local Base = {} Base.__index = Base
local Derived = setmetatable({}, Base) Derived.__index = Derived
local obj = setmetatable({}, Derived)
setmetatable(Base, {__index = {late = "late"}})
assert(obj.late == "late")
-- A string __index goes through the string metatable.
local s = setmetatable({}, {__index = "abc"})
assert(s.upper("a") == "A")
return "walked"
