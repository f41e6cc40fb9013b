-- Penlight (Debian's lua-penlight) under moonbox and stock lua5.4: tests/libs/test_libs.sh.
-- packages: lua-penlight
-- luadir: 5.4
-- Left out, each a documented difference:
-- - List's `..` (its __concat never runs, `..` raises: docs/compat.md, the `__concat` row),
--   and pl.func's placeholders.
-- - pretty.read/pretty.load: they call debug.gethook/sethook and debug.setmetatable on the
--   string metatable (docs/compat.md, "`debug`").
-- - text.format_operator: it sets __mod in the string metatable (docs/compat.md, the "String
--   methods" row).
-- - pl.path, pl.dir, pl.file, pl.app, pl.test: LuaFileSystem, a C module (docs/compat.md,
--   "Modules and script arguments"; the last line checks that either way), and xml.parse's
--   LuaExpat parser (the basic parser is used).
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

local tablex = require "pl.tablex"
local stringx = require "pl.stringx"
local pretty = require "pl.pretty"
local class = require "pl.class"
local utils = require "pl.utils"
local OrderedMap = require "pl.OrderedMap"
local Set = require "pl.Set"
local Map = require "pl.Map"
local MultiMap = require "pl.MultiMap"
local seq = require "pl.seq"
local array2d = require "pl.array2d"
local template = require "pl.template"
local lexer = require "pl.lexer"
local text = require "pl.text"
local sip = require "pl.sip"
local types = require "pl.types"
local operator = require "pl.operator"
local permute = require "pl.permute"
local comprehension = require "pl.comprehension"
local stringio = require "pl.stringio"
local lapp = require "pl.lapp"
local Date = require "pl.Date"
local url = require "pl.url"
local xml = require "pl.xml"
local data = require "pl.data"
local config = require "pl.config"

-- tablex
check("tablex.map", tablex.map, function(x) return x * x end, {1, 2, 3})
check("tablex.reduce", tablex.reduce, "+", {1, 2, 3, 4})
check("tablex.deepcompare", tablex.deepcompare, {a = {1, 2}, b = "x"}, {b = "x", a = {1, 2}})
check("tablex.deepcompare differs", tablex.deepcompare, {a = {1, 2}}, {a = {1, 3}})
check("tablex.merge", tablex.merge, {a = 1, b = 2}, {b = 3, c = 4}, true)
check("tablex.union", tablex.union, {a = 1}, {b = 2})
check("tablex.zip", tablex.zip, {1, 2}, {"a", "b"})
check("tablex.find", tablex.find, {"a", "b", "c"}, "c")
check("tablex.count_map", tablex.count_map, {"a", "b", "a", "c", "a"})
check("tablex.sortv", function() local out = {} for k, v in tablex.sortv({x = 3, y = 1, z = 2}) do out[#out + 1] = k .. v end return table.concat(out, " ") end)
check("tablex.sort", function() local out = {} for k, v in tablex.sort({x = 3, y = 1, z = 2}) do out[#out + 1] = k .. v end return table.concat(out, " ") end)
check("tablex.deepcopy cycle", function() local t = {1, {2}}; t.self = t; local c = tablex.deepcopy(t); return c.self == c, c[2][1], c ~= t end)
check("tablex.readonly", function() local r = tablex.readonly({1, 2}); return r[1], #r, pcall(function() r[3] = 1 end) end)
check("tablex.pairmap", tablex.pairmap, function(k, v) return v .. k end, {a = "x"})
check("tablex.imap2", tablex.imap2, function(a, b) return a + b end, {1, 2}, {10, 20})
check("tablex.bad argument", tablex.map, 42, {1})

-- stringx
check("stringx.strip", stringx.strip, "  hi there \n")
check("stringx.startswith", stringx.startswith, "hello.lua", "hello")
check("stringx.endswith", stringx.endswith, "hello.lua", {".c", ".lua"})
check("stringx.replace", stringx.replace, "a.b.c", ".", "::", 1)
check("stringx.count", stringx.count, "banana", "an")
check("stringx.title", stringx.title, "the quick brown fox")
check("stringx.shorten", stringx.shorten, "a long string of text", 10)
check("stringx.partition", stringx.partition, "key=value=x", "=")
check("stringx.rpartition", stringx.rpartition, "key=value=x", "=")
check("stringx.center", stringx.center, "hi", 8, "*")
check("stringx.expandtabs", stringx.expandtabs, "a\tb", 4)
check("stringx.lines", function() local out = {} for l in stringx.lines("x\ny\nz") do out[#out + 1] = l end return out end)
check("stringx.isdigit", stringx.isdigit, "12345")
check("stringx.at", stringx.at, "hello", 2)
check("stringx.join", stringx.join, "-", {"a", "b", "c"})

-- pretty
check("pretty.write", pretty.write, {1, 2, {a = "x"}, b = true}, "")
check("pretty.write indent", pretty.write, {list = {1, 2}, name = "n", nested = {deep = {x = 1}}})
check("pretty.number", pretty.number, 1234567, "M")
check("pretty.write cycle", function() local t = {1}; t.me = t; return pretty.write(t, "") end)

-- class
local Animal = class()
function Animal:_init(name) self.name = name end
function Animal:speak() return self.name .. " makes a sound" end
function Animal:__tostring() return "Animal(" .. self.name .. ")" end
local Dog = class(Animal)
function Dog:_init(name, breed) self:super(name); self.breed = breed end
function Dog:speak() return self.name .. " the " .. self.breed .. " barks" end
class.Cat(Animal)
function Cat:speak() return self.name .. " meows" end
local Point
Point = class {
  _init = function(self, x, y) self.x, self.y = x, y end,
  __add = function(a, b) return Point(a.x + b.x, a.y + b.y) end,
  __eq = function(a, b) return a.x == b.x and a.y == b.y end,
  __tostring = function(p) return "(" .. p.x .. "," .. p.y .. ")" end,
}
local Temp = class()
Temp.celsius = 0
Temp:catch(function(self, key) if key == "fahrenheit" then return self.celsius * 9 / 5 + 32 end end)
check("class.speak", function() return Animal("generic"):speak(), Dog("Rex", "terrier"):speak(), Cat("Tom"):speak() end)
check("class.tostring", function() return tostring(Dog("Rex", "lab")) end)
check("class.is_a", function() local d = Dog("a", "b"); return d:is_a(Animal), d:is_a(Cat), Dog:class_of(d), Animal:class_of(d), Cat:class_of(d) end)
check("class.operators", function() local p = Point(1, 2) + Point(3, 4); return tostring(p), p == Point(4, 6), p == Point(0, 0) end)
check("class._base", function() return Dog._base == Animal, Cat._base == Animal, rawequal(Animal._base, nil) end)
check("class.catch", function() local t = Temp(); t.celsius = 100; return t.fahrenheit, t.missing end)
local Props = class(class.properties)
function Props:get_area() return self.w * self.h end
function Props:set_w(w) self._w_set = true; rawset(self, "w", w) end
check("class.properties", function() local p = Props(); p.h = 3; p.w = 4; return p.area, p._w_set end)

-- utils
check("utils.split", utils.split, "a b  c")
check("utils.splitv", utils.splitv, "1:2:3", ":")
check("utils.memoize", function() local n = 0; local f = utils.memoize(function(x) n = n + 1; return x * 2 end); return f(2), f(2), f(3), n end)
check("utils.bind1", function() return utils.bind1(math.max, 10)(3, 20) end)
check("utils.string_lambda", function() return utils.string_lambda("|x,y| x*y")(6, 7), utils.string_lambda("_+1")(1) end)
check("utils.quote_arg", utils.quote_arg, {"a b", "c"})
check("utils.pack/unpack", function() local p = utils.pack(1, nil, 3); return p.n, utils.unpack(p, 1, p.n) end)
check("utils.choose", utils.choose, false, "yes", "no")
check("utils.array_tostring", utils.array_tostring, {1, 2.5, "x"})
check("utils.kpairs", function() local out = {} for k in utils.kpairs({1, 2, a = 1}) do out[#out + 1] = k end return out end)
check("utils.assert_arg", utils.assert_arg, 1, 5, "string")
check("utils.raise", function() return utils.raise("oops") end)
check("utils.enum", function() local E = utils.enum("A", "B"); return E.A, E.B, pcall(function() return E.C end) end)
check("utils.npairs", function() local out = {} for i, v in utils.npairs({"a", "b", "c"}, 2) do out[#out + 1] = i .. v end return out end)

-- (pl.OrderedMap, pl.Map, pl.Set, pl.MultiMap load; their objects are left out, see above)

-- seq
check("seq.sum/minmax", function() return seq.sum({1, 2, 3, 4}), seq.minmax({5, 2, 9}) end)
check("seq.count", seq.count, {1, 2, 3, 4, 5}, function(x) return x > 2 end)
check("seq.enum", function() return seq.copy2(seq.enum(seq.list({"a", "b"}))) end)

-- array2d
check("array2d.new", array2d.new, 2, 3, 0)
check("array2d.transpose", array2d.transpose, {{1, 2, 3}, {4, 5, 6}})
check("array2d.reduce_rows", array2d.reduce_rows, "+", {{1, 2}, {3, 4}})
check("array2d.slice", array2d.slice, {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, 2, 2, 3, 3)
check("array2d.write", function() local f = stringio.create(); array2d.write({{1, 2}, {3, 4}}, f, " %d"); return f:value() end)

-- template, text, lexer, sip
check("template.substitute", template.substitute, "Hello $(name)!\n# for i = 1, 3 do\n$(i)\n# end\n", {name = "world", _parent = _G})
check("template.compile", function() local t = template.compile("<$(x)>", {}); return t:render({x = 5}) end)
check("template error", template.substitute, "$(1 +)", {})
check("text.dedent", text.dedent, "    a\n    b\n")
check("text.indent", text.indent, "a\nb\n", 2)
check("text.Template", function() return text.Template("${who} is $what"):substitute({who = "x", what = "y"}) end)
check("lexer.lua", function()
  local out = {}
  for t, v in lexer.lua("local x = 10 + y -- c\nreturn 'str'") do out[#out + 1] = t .. ":" .. v end
  return table.concat(out, " ")
end)
check("lexer.scan", function()
  local out = {}
  for t, v in lexer.scan("alpha = 2.5 * (beta)") do out[#out + 1] = t .. ":" .. tostring(v) end
  return table.concat(out, " ")
end)
check("lexer.get_separated_list", function() local tok = lexer.lua("a, b, (c, d)"); return lexer.get_separated_list(tok) end)
check("sip.match", function() local res = {}; local ok = sip.match("$v{name}=$d{value}", "count=42", res); return ok, res end)
check("sip.compile", function() local p = sip.compile("$S $d"); local r = {}; return p("hello 12", r), r end)

-- types, operator, permute, comprehension
check("types", function() return types.is_callable(print), types.is_integer(3), types.is_empty({}), types.is_iterable({}), types.to_bool("yes"), types.type(Point(1, 1)) end)
check("operator", function() return operator.add(2, 3), operator.lt(1, 2), operator.match("abc", "b"), operator.optable["*"](6, 7) end)
check("permute.order_iter", function() local out = {} for p in permute.order_iter({1, 2, 3}) do out[#out + 1] = table.concat(p) end return out end)
check("permute.list_iter", function() local out = {} for i, a, b in permute.list_iter({1, 2}, {"x", "y"}) do out[#out + 1] = i .. a .. b end return out end)
local C = comprehension.new()
check("comprehension", function() return C "x^2 for _, x in ipairs(_1)" {1, 2, 3}, C "{x, y} for x in _1 for y in _2 if x ~= y" ({1, 2}, {1, 2}), C "sum(x for x)" {1, 2, 3} end)

-- stringio, lapp, Date, url, xml, data, config
check("stringio", function()
  local f = stringio.open("line one\n42 3.5\n")
  local l = f:read()
  local a, b = f:read("*n", "*n")
  local w = stringio.create(); w:write("a", 1, "b"); return l, a, b, w:value()
end)
check("lapp", function()
  local args = lapp([[
Test program
  -v,--verbose  Verbose
  -n (default 10) Count
  <file> (string)
]], {"-v", "-n", "5", "in.txt"})
  return args.verbose, args.n, args.file
end)
check("Date", function()
  local d = Date({year = 2024, month = 2, day = 28, hour = 12}, true)
  d:add({day = 2})
  return d:year(), d:month(), d:day(), d:is_weekend(), Date.Format("yyyy-mm-dd"):tostring(d)
end)
check("Date.Format parse", function() local f = Date.Format("dd/mm/yyyy"); local d = f:parse("15/06/2021"); return d:year(), d:month(), d:day() end)
check("url", function() return url.quote("a b&c"), url.unquote("a%20b+c", true), url.quote("x y", true) end)
check("xml.parse", function()
  local doc = xml.parse("<root a='1'><item>x</item><item>y</item></root>", false, true)
  local out = {}
  for item in doc:childtags() do out[#out + 1] = item:get_text() end
  return doc.tag, doc.attr.a, table.concat(out, ","), xml.tostring(doc)
end)
check("xml.new", function() local d = xml.new("a", {k = "v"}); d:addtag("b"):text("t"); return xml.tostring(d) end)
check("config.read", function() return config.read(stringio.open("# c\nname = value\nn = 5\nlist = 1,2,3\n"), {list_delim = ","}) end)

-- pl.List and what builds on it (its metatable holds __concat; only `..` is refused).
local List = require "pl.List"
check("List basics", function() local l = List{3, 1, 2}; l:append(5); l:sort(); return l, l:len(), tostring(l), l:index(5) end)
check("List map/filter/reduce", function() local l = List{1, 2, 3, 4}; return l:map(function(x) return x * x end), l:filter(function(x) return x % 2 == 0 end), l:reduce("+") end)
check("List slice/reverse/extend", function() local l = List.range(1, 6); return l:slice(2, 4), List{1, 2}:reverse(), List{1}:extend{2, 3}, l:contains(3) end)
check("List == and partition", function() return List{1, 2} == List{1, 2}, List{1, 2, 3, 4}:partition(function(x) return x > 2 end) end)
check("stringx.split", function() return stringx.split("a,b,,c", ","), stringx.split("  x  y "), stringx.splitlines("1\n2\n") end)
check("tablex.filter/keys/range", function() return tablex.filter({1, 2, 3, 4}, function(x) return x > 2 end), List(tablex.keys({a = 1, b = 2})):sort(), tablex.range(1, 9, 3) end)
check("Set ops", function() local a, b = Set{1, 2, 3}, Set{2, 3, 4}; return Set.values(a * b), Set.values(a + b), Set.values(a - b), Set.len(a), Set.issubset(Set{2}, a) end)
check("Map", function() local m = Map{alpha = 1, beta = 2}; m:set("gamma", 3); return m:get("beta"), m:len(), List(m:keys()):sort() end)
check("OrderedMap", function() local m = OrderedMap(); m:set("z", 1); m:set("a", 2); m:set("m", 3); return m:keys(), m:values(), tostring(m) end)
check("MultiMap", function() local m = MultiMap(); m:set("k", 1); m:set("k", 2); return m:get("k") end)
check("seq chains", function() return seq{5, 3, 8}:sort():copy(), seq.copy(seq.filter({1, 2, 3, 4}, function(x) return x % 2 == 1 end)) end)

-- Needs LuaFileSystem: stock loads lfs.so, moonbox has no C modules; either way pl.path is
-- not used further (only whether it loaded, so both print the same line).
check("pl.path loads or says why", function() local ok, e = pcall(require, "pl.path"); return ok or tostring(e):match("pl.path requires LuaFileSystem") ~= nil end)
