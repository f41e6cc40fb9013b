-- inspect.lua (Debian's lua-inspect, packaged for Lua 5.1-5.3 only: loaded from 5.3's folder)
-- under moonbox and stock lua5.4: tests/libs/test_libs.sh.
-- packages: lua-inspect
-- luadir: 5.3
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

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
