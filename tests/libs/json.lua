-- lua-json (Debian's lua-json, packaged for Lua 5.1-5.3 only: loaded from 5.3's folder). Its
-- decoder is built on LPeg, a C module: stock lua5.4 runs this script (lua-lpeg ships a 5.4
-- build), moonbox stops at json.decode's `require "lpeg"` (C modules cannot be loaded:
-- docs/compat.md, "Modules and script arguments"); tests/libs/test_libs.sh checks both.
-- packages: lua-json
-- luadir: 5.3
-- moonbox-error: /lua/5.3/json/decode.lua:5: module 'lpeg' not found
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

local json = require "json"

check("encode", function() return json.encode({1, 2, "x", true}), json.encode("a\"b\n"), json.encode(json.util.null) end)
check("encode object", json.encode, {only = 1})
check("decode", json.decode, '{"a": [1, 2.5, "s", null, true]}')
check("decode strict error", function() return pcall(json.decode, '{"a": }') end)
check("round trip", function() return json.encode(json.decode('[1,[2,[3]],"x"]')) end)
