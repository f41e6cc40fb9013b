-- dkjson's own test suite, jsontest.lua (Debian's lua-dkjson ships it in its examples folder),
-- run unchanged under moonbox and stock lua5.4: tests/libs/test_libs.sh. The suite prints a
-- line for each check that fails and a few lines describing dkjson's choices (sparse arrays,
-- NaN); stdout must be the same. Two things are evened out, both for stock and moonbox:
-- - "mixed table encoded as" shows an object whose key order follows the process's hash seed
--   (it changes from run to run in lua5.4): its keys are printed sorted;
-- - the locale checks switch to de_DE.UTF8 when the machine has it; moonbox's os.setlocale
--   is always C (docs/compat.md, `os.setlocale`), so stock is given the same answer.
-- packages: lua-dkjson
-- luadir: 5.4
-- mount: /usr/share/doc/lua-dkjson/examples:/dkjson-examples
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x EXAMPLES")
local examples = assert(arg[2], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x EXAMPLES")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local json = require "dkjson"

os.setlocale = function(locale)
  if locale == nil or locale == "" or locale == "C" or locale == "POSIX" then return "C" end
  return nil
end

local real_print, lines = print, 0
local function sorted_object(prefix, text)
  local v = json.decode(text)
  if type(v) ~= "table" then return nil end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  return prefix .. json.encode(v, {keyorder = keys})
end
print = function(...)
  local t = table.pack(...)
  for i = 1, t.n do t[i] = tostring(t[i]) end
  local line = table.concat(t, "\t"):gsub("(mixed table encoded as:\t)(%b{})", sorted_object)
  lines = lines + 1
  real_print(line)
end
assert(loadfile(examples .. "/jsontest.lua"))("dkjson")
print = real_print
print(("jsontest.lua ran to its end, %d lines"):format(lines))
