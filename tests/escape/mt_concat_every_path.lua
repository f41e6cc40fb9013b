-- expect: ok
-- Attack: a class whose metatable has __concat (accepted by setmetatable since ac12549) reached
-- by every path that could concatenate or convert it from C: `..`, table.concat,
-- string.format, tostring/print/error with __tostring, a live arithmetic stub whose handler
-- concatenates, debug.setmetatable, a pinned chain target's private copy, the JSON array
-- marker (THREATS 0.1: Debian 5.4.4's luaV_concat stale pointer, upstream 603b2c64). A guest
-- __concat must never run: each one here prints the marker and grows the stack.
local function concat_ran(a, b)
  print("ESCAPED: a guest __concat ran")
  local function grow(n) if n > 0 then return grow(n - 1) + 1 end return 0 end
  grow(200)
  return "c"
end
local Class = {__concat = concat_ran, __tostring = function() return "obj" end}
Class.__index = Class
local obj = setmetatable({}, Class)
local refused = 0
local function must_fail(what, f, ...)
  local ok, err = pcall(f, ...)
  if ok then print("ESCAPED: " .. what .. " succeeded") end
  if tostring(err):find("__concat", 1, true) then refused = refused + 1 end
end
must_fail("obj .. s", function() return obj .. "s" end)
must_fail("s .. obj", function() return "s" .. obj end)
must_fail("n .. obj .. n", function() return 1 .. obj .. 2 end)
local ok, err = pcall(table.concat, {"a", obj, "b"})
assert(not ok and err:find("invalid value", 1, true), "table.concat refuses a table: " .. tostring(err))
assert(string.format("%s", obj) == "obj", "format uses __tostring, not __concat")
assert(tostring(obj) == "obj")
print(obj)
-- A late __add (a live stub) whose handler concatenates: the stub's frame is between.
Class.__add = function(a, b) return a .. b end
must_fail("a live __add that concatenates", function() return obj + 1 end)
-- __concat added late to a class without one, and set on another through debug.
local Late = {}
local late = setmetatable({}, Late)
Late.__concat = concat_ran
must_fail("late __concat", function() return late .. late end)
debug.setmetatable(late, {__concat = concat_ran})
must_fail("debug.setmetatable", function() return "x" .. late end)
-- A chain target that is pinned and then given a class with __concat: its private copy.
local Base = {}
local Derived = setmetatable({}, {__index = Base})
local inst = setmetatable({}, {__index = Derived})
setmetatable(Base, {__index = {deep = true}, __concat = concat_ran})
setmetatable(Derived, {__index = Base, __concat = concat_ran})
must_fail("pinned target's copy", function() return Derived .. "x" end)
must_fail("pinned base", function() return Base .. "x" end)
assert(inst.deep == true)
-- The JSON array marker, replaced by a metatable with __concat.
local arr = json.decode("[]")
setmetatable(arr, {__concat = concat_ran, __jsontype = "array"})
must_fail("array marker", function() return arr .. "x" end)
assert(json.encode(arr) == "[]")
-- Concatenations the guest cannot see: error positions, tracebacks, coroutine messages.
must_fail("error with a table", function() error(obj) end)
local co = coroutine.wrap(function() return obj .. 1 end)
must_fail("in a coroutine", co)
assert(refused == 10, "every `..` raised the refusal, got " .. refused)
return refused
