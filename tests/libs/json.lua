-- lua-json (Debian's lua-json, packaged for Lua 5.1-5.3 only: loaded from 5.3's folder). Its
-- decoder is built on LPeg, a C module: stock lua5.4 runs this script (lua-lpeg ships a 5.4
-- build), moonbox stops at json.decode's `require "lpeg"` (C modules cannot be loaded:
-- docs/compat.md, "Modules and script arguments"); tests/libs/test_libs.sh checks both.
-- packages: lua-json
-- luadir: 5.3
-- moonbox-error: /lua/5.3/json/decode.lua:5: module 'lpeg' not found
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

local json = require "json"

check("encode", function() return json.encode({1, 2, "x", true}), json.encode("a\"b\n"), json.encode(json.util.null) end)
check("encode object", json.encode, {only = 1})
check("decode", json.decode, '{"a": [1, 2.5, "s", null, true]}')
check("decode strict error", function() return pcall(json.decode, '{"a": }') end)
check("round trip", function() return json.encode(json.decode('[1,[2,[3]],"x"]')) end)
