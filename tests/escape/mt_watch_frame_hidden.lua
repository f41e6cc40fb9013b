-- expect: ok
-- Attack: find the hidden metatable of a metatable (its watch, issue 26) through the stack.
-- A store of a nil or NaN key into a watched metatable is raised from the watch's C
-- __newindex, where stock Lua raises it from the instruction itself; an xpcall handler then
-- saw one C level more than stock (debug.getinfo(2) a C function named as metamethod
-- 'newindex', error(msg, 2) placed there): proof that the table has a metatable although
-- getmetatable says nil. Levels skip that frame as they skip the walkers' and live stubs'.
local mt = {}
local obj = setmetatable({}, mt)
assert(getmetatable(mt) == nil and getmetatable(obj) == mt)
local function probe(store)
  local seen
  local ok, msg = xpcall(store, function(e)
    local up = debug.getinfo(2, "Sn")
    seen = up.what .. " " .. tostring(up.namewhat) .. " " .. tostring(up.name)
    return e
  end)
  assert(not ok)
  if seen:find("^C") then print("ESCAPED: a hidden C frame under the store: " .. seen) end
  return msg
end
local m1 = probe(function() mt[nil] = 1 end)
local m2 = probe(function() mt[0 / 0] = 1 end)
assert(m1:find("table index is nil", 1, true), m1)
assert(m2:find("table index is NaN", 1, true), m2)
-- error with level 2 from a function the bad store's handler calls names the store's caller,
-- as stock does with no C level in between.
local function caller()
  local ok, msg = xpcall(function() mt[nil] = 1 end, function()
    return select(2, pcall(error, "at", 3))
  end)
  return msg
end
print(caller())
-- The same through a pinned, watched metatable (a chain target that is also a metatable).
local pinned_user = setmetatable({}, {__index = mt})
assert(pinned_user ~= nil and getmetatable(mt) == nil)
probe(function() mt[nil] = 1 end)
print("watch frames hidden")
