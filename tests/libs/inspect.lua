-- inspect.lua (Debian's lua-inspect, packaged for Lua 5.1-5.3 only: loaded from 5.3's folder)
-- under moonbox and stock lua5.4: tests/libs/test_libs.sh.
-- packages: lua-inspect
-- luadir: 5.3
-- Each call prints one line: its label and its results (tables with sorted keys), or the error
-- it raised; addresses and the library folder are masked, so both interpreters print the same.
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local function order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end
local function ser(v, seen)
  if type(v) == "string" then return (string.format("%q", v):gsub("\\\n", "\\n")) end
  if type(v) ~= "table" then return tostring(v) end
  seen = seen or {}
  if seen[v] then return "<cycle>" end
  seen[v] = true
  local keys, parts = {}, {}
  for k in next, v do keys[#keys + 1] = k end
  table.sort(keys, order)
  for _, k in ipairs(keys) do
    parts[#parts + 1] = (type(k) == "string" and k or "[" .. ser(k, seen) .. "]") .. "=" .. ser(v[k], seen)
  end
  seen[v] = nil
  return "{" .. table.concat(parts, ",") .. "}"
end
local function check(label, f, ...)
  local r = table.pack(pcall(f, ...))
  local out = {}
  for i = 2, r.n do out[#out + 1] = ser(r[i]) end
  local line = label .. (r[1] and ": " or ": error: ") .. table.concat(out, ", ")
  line = line:gsub("0x%x+", "0xADDR"):gsub((root:gsub("%p", "%%%0")), "ROOT")
  print(line)
end

local inspect = require "inspect"

check("version", function() return inspect._VERSION end)
check("scalars", function() return inspect(1), inspect(2.5), inspect("a\nb\"c"), inspect(nil), inspect(true) end)
check("array", inspect, {1, 2, 3})
check("hash sorted", inspect, {b = 2, a = 1, ["with space"] = 3, [10] = "ten"})
check("mixed", inspect, {1, 2, x = {y = {z = "deep"}}})
check("nested newline", inspect, {a = {b = {c = {}}}}, {newline = " ", indent = ""})
check("depth", inspect, {a = {b = {c = {d = 1}}}}, {depth = 2})
check("cycle", function() local t = {name = "me"}; t.self = t; t.list = {t}; return inspect(t) end)
check("shared not cyclic", function() local s = {1}; return inspect({s, s}) end)
check("metatable", function() local mt = {__index = {x = 1}, __tostring = function() return "T" end}; return inspect(setmetatable({a = 1}, mt)) end)
check("metatable of metatable", function() local mt = setmetatable({kind = "mt"}, {kind = "meta-mt"}); return inspect(setmetatable({}, mt)) end)
check("process remove metatables", inspect, setmetatable({a = {b = 1}}, {m = 1}), {
  process = function(item, path) if path[#path] ~= inspect.METATABLE then return item end end})
check("process path", function()
  local seen = {}
  inspect({a = {b = 1}, c = 2}, {process = function(item, path)
    local p = {}
    for i, k in ipairs(path) do p[i] = tostring(k) end
    seen[#seen + 1] = table.concat(p, ".")
    return item
  end})
  table.sort(seen)
  return table.concat(seen, " | ")
end)
check("process replace", inspect, {1, "two", 3}, {process = function(item) if type(item) == "number" then return item * 100 end return item end})
check("KEY constant", function() return inspect(inspect.KEY), inspect(inspect.METATABLE) end)
check("escape", inspect, {["\1\2"] = "\0\127\255"})
check("numeric keys", inspect, {[1.5] = "a", [-1] = "b", [0] = "c"})
check("boolean keys", inspect, {[true] = 1, [false] = 0})
check("long array with holes", inspect, {1, nil, 3})
check("indent option", inspect, {x = {1}}, {indent = "\t"})
