-- expect: ok
-- Attack: make setmetatable reuse a cached clone (5bc1550: constant-work check) that no longer
-- matches the class (THREATS P0 item 4): protection added with __metatable, a __mode change,
-- a __newindex or __index added or replaced, __call replaced by a table, the class made its
-- own __index (a loop over a long key), all after objects were set up from the same class.
-- Objects set up after each change must get what docs/compat.md says they see.
local mt = {}
local a = setmetatable({}, mt)
-- __metatable added later protects objects set up after it (and getmetatable hides mt).
mt.__metatable = "locked"
local b = setmetatable({}, mt)
if getmetatable(b) ~= "locked" then print("ESCAPED: a stale clone hides __metatable") end
if pcall(setmetatable, b, {}) then print("ESCAPED: a protected metatable was replaced") end
mt.__metatable = false
local c = setmetatable({}, mt)
if getmetatable(c) ~= false or pcall(setmetatable, c, {}) then
  print("ESCAPED: __metatable = false does not protect")
end
mt.__metatable = nil
local d = setmetatable({}, mt)
assert(getmetatable(d) == mt and setmetatable(d, nil) == d)
-- A __newindex added later is seen by objects set up after it.
local log = {}
mt.__newindex = function(t, k, v) log[#log + 1] = k end
local e = setmetatable({}, mt)
e.x = 1
if rawget(e, "x") ~= nil or log[1] ~= "x" then print("ESCAPED: a stale clone ignores __newindex") end
-- __index replaced: the new class's values, not the old one's.
mt.__index = {v = 1}
local f = setmetatable({}, mt)
mt.__index = {v = 2}
local g = setmetatable({}, mt)
assert(g.v == 2, "an object set up after __index was replaced reads the new one")
-- __mode changed: the new object is weak as asked (outside deterministic mode).
mt.__mode = "k"
local w = setmetatable({}, mt)
rawset(w, {}, true)
collectgarbage()
assert(next(w) == nil, "a weak-keyed object lost its dead key")
mt.__mode = nil
-- __call replaced by a callable table: refused at setmetatable (a stale clone would keep the
-- old function), and at the call by objects set up before (a function __call is read live),
-- as one added late through the stub is.
mt.__call = function() return "fn" end
local h = setmetatable({}, mt)
assert(h() == "fn")
mt.__call = setmetatable({}, {__call = function() return "ESCAPED: a table as __call" end})
if pcall(setmetatable, {}, mt) then print("ESCAPED: a table as __call was accepted") end
local called, why = pcall(h)
if called then print("ESCAPED: a table as __call was called") end
assert(tostring(why):find("must be a function", 1, true), why)
local plain = {}
local p = setmetatable({}, plain)
plain.__call = mt.__call
local ok, err = pcall(p)
if ok then print(err) end
assert(tostring(err):find("must be a function", 1, true), err)
-- The class becomes its own __index after a clone was cached: the loop is walked (metered)
-- and a missing key raises stock's error.
local C = {}
local objs = {}
for i = 1, 3 do objs[i] = setmetatable({}, C) end
C.__index = C
setmetatable(C, C)
C.m = 7
assert(objs[1].m == 7 and objs[3].m == 7)
local ok2, err2 = pcall(function() return objs[1].missing end)
assert(not ok2 and tostring(err2):find("chain too long", 1, true), err2)
return "ok"
