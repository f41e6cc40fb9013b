-- expect: ok
-- stdout-contains: walks done
-- Issue 9, E.5: every C walk of a table (lua_next) whose order a guest can observe, in one
-- script. Lua's lua_next order follows the string-hash seed and addresses, so it differs
-- between processes. tests/determinism runs this (with the agent corpus and every other
-- hostile script) in several fresh processes in deterministic mode and compares the
-- results byte for byte; here the errors that name one key are checked against the fixed order.
local function show(...) print(select("#", ...), ...) end

-- vm/json.c encode: the error names one bad key, whichever lua_next meets first.
local bad = {}
for i = 1, 40 do bad["key" .. i] = i end
bad[true] = 1
bad[1.5] = 2
bad[{}] = 3
bad[print] = 4
bad["\xff\xfeone"] = 5
bad["\xffzero"] = 6
-- The key named is the least bad one in a fixed order, whatever the walk met first.
local function names(t, expected)
  local ok, err = pcall(json.encode, t)
  print(err)
  if ok or err ~= expected then error("ESCAPED: order-dependent error: " .. tostring(err), 0) end
end
names({outer = {inner = bad}}, 'json.encode: value.outer.inner["\\255zero"]: cannot encode ' ..
      'a table key that is not valid UTF-8 as JSON')
bad["\xff\xfeone"], bad["\xffzero"] = nil, nil
names(bad, "json.encode: value: cannot encode a table with a non-integer number key as JSON")
bad[1.5] = nil
names(bad, "json.encode: value: cannot encode a table with a boolean key as JSON")
bad[true] = nil
names(bad, "json.encode: value: cannot encode a table with a table key as JSON")
show(json.encode({b = 1, a = {3, 2, 1}, c = {z = true, y = false}, [10] = "ten"}))

-- luaL_argerror naming a function called without a name walks the loaded-module table.
for _, f in ipairs({setmetatable, getmetatable, rawlen, string.rep, string.format,
                    table.concat, table.insert, math.floor, utf8.char, coroutine.resume,
                    json.encode, os.time, tostring, tonumber, select, load}) do
  show(pcall(f, setmetatable({}, {})))
end

-- setmetatable's clone cache compares a class by walking it.
local class = {}
for i = 1, 30 do class["method" .. i] = function() return i end end
class.__index = class
class.__tostring = function() return "object" end
local a, b = setmetatable({}, class), setmetatable({}, class)
show(tostring(a), tostring(b), a.method7(), getmetatable(a) == getmetatable(b))
class.__len = function() return 7 end
show(#setmetatable({}, class))

-- pairs and next over every kind of key, with object keys shown by tostring.
local mixed = {10, 20, 30, x = 1, y = 2, [2.5] = "f", [-1] = "neg", [true] = "t", [false] = "f"}
mixed[{}] = "table"
mixed[print] = "builtin"
mixed[function() end] = "closure"
for i = 1, 30 do mixed["s" .. i] = i end
local seen = {}
for k, v in pairs(mixed) do seen[#seen + 1] = tostring(k) .. "=" .. tostring(v) end
print(table.concat(seen, " "))
local k, v = next(mixed)
local steps = 0
while k ~= nil do steps = steps + 1 k, v = next(mixed, k) end
show(steps)
print("walks done")
