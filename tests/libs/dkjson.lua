-- dkjson (Debian's lua-dkjson) under moonbox and stock lua5.4: tests/libs/test_libs.sh. The file
-- on package.path wins over moonbox's built-in `dkjson` alias (docs/compat.md, "Modules and
-- script arguments"); the first line checks that it is the library's own table. dkjson's
-- optional LPeg parser (dkjson.use_lpeg) is a C module and is not used.
-- packages: lua-dkjson
-- luadir: 5.4
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

local json = require "dkjson"
local function enc(v, state) return json.encode(v, state or {keyorder = {"a", "b", "c", "id", "name", "tags"}}) end

check("the library's own", function() return json.version, type(json.use_lpeg), json.null ~= nil end)
check("encode scalars", function() return enc(1), enc(-2.5), enc("a\"b\\c\n\t\1"), enc(true), enc(json.null) end)
check("encode array", enc, {1, 2, 3, "x", false})
check("encode keyorder", enc, {c = 3, b = 2, a = 1})
check("encode nested", enc, {name = "n", tags = {"x", "y"}, id = 7})
check("encode indent", json.encode, {a = {1, 2}, b = {c = true}}, {indent = true, keyorder = {"a", "b", "c"}})
check("encode empty", function() return enc({}), enc(setmetatable({}, {__jsontype = "array"})), enc(setmetatable({}, {__jsontype = "object"})) end)
check("encode sparse array", enc, {[1] = 1, [3] = 3})
check("encode utf8", enc, "h\195\169llo \226\130\172")
check("encode float", function() return enc(0.1), enc(1e300), enc(3.0), enc(-0.0) end)
check("encode __tojson", enc, setmetatable({}, {__tojson = function(self, state) return '"custom"' end}))
check("encode cycle", json.encode, (function() local t = {}; t.t = t; return t end)())
check("encode function", json.encode, {f = print})
check("encode exception", json.encode, {1, print, 3}, {exception = json.encodeexception})
check("encode nan", json.encode, {0 / 0})
check("encode buffer", function() local buf = {}; json.encode({1, 2}, {buffer = buf}); return table.concat(buf) end)
check("quotestring", json.quotestring, "line\nbreak \"q\" \127")
check("decode object", function() local v, pos = json.decode('{"a": 1, "b": [true, false, null], "c": {"d": "e"}}'); return v, pos end)
check("decode numbers", json.decode, "[0, -1, 1.5, 2e3, -3.25E-2, 123456789012]")
check("decode strings", json.decode, '["\\u00e9\\u20ac", "\\n\\t\\"\\\\\\/", "\\ud83d\\ude00"]')
check("decode null default", function() local v = json.decode("[1, null, 3]"); return v[3], v[2] end)
check("decode null sentinel", function() local v = json.decode("[1, null]", 1, json.null); return v[2] == json.null end)
check("decode objectmeta", function() local v = json.decode('{"x": []}'); return getmetatable(v).__jsontype, getmetatable(v.x).__jsontype end)
check("decode no meta", function() local v = json.decode('{"x": 1}', 1, nil, nil); return getmetatable(v) ~= nil end)
check("decode position", json.decode, '  {"a":1} trailing', 1)
check("decode error unterminated", json.decode, '{"a": [1, 2')
check("decode error bad token", json.decode, '{"a": tru}')
check("decode error trailing comma", json.decode, '[1, 2,]')
check("decode error string", json.decode, '"abc')
check("decode error empty", json.decode, '')
check("round trip", function()
  local v = {id = 1, name = "caf\195\169", tags = {"a", "b"}, b = {c = {1.5, -2}}}
  local text = enc(v)
  return text, enc((json.decode(text))) == text
end)
check("round trip deep", function()
  local v = {}
  local cur = v
  for i = 1, 50 do cur.a = {i}; cur = cur.a end
  local text = enc(v)
  return #text, enc((json.decode(text))) == text
end)
check("addnewline/state", function() local state = {indent = true, level = 1, keyorder = {"a"}}; return json.encode({a = 1}, state) end)
