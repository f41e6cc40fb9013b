-- expect: runtime_error
-- error-contains: stack overflow
-- Attack: each require runs the module's chunk in a nested C call (require -> loader ->
-- require ...): a module that requires itself under a new name each time, or two modules that
-- require each other, nest C frames without end. Stock Lua stops at its C-call count; moonbox's
-- C stack guard (vm/cstack.h) stops any chain its count would not. The run must end with a
-- clear error, never a crash, and package.loaded must not have been poisoned with a partial
-- module.
local f = assert(io.open("/tmp/deep.lua", "w"))
f:write("local n = ... return require('deep' .. (tonumber(n:match('%d+') or 0) + 1))")
f:close()
package.path = "/tmp/?.lua;" .. package.path
-- deep1, deep2, ... all resolve to /tmp/deep.lua through a searcher that maps any name to it.
table.insert(package.searchers, 2, function(name)
  if name:match("^deep%d*$") then return assert(loadfile("/tmp/deep.lua")), name end
end)
local ok, e = pcall(require, "deep0")
if ok then print("ESCAPED: unbounded require recursion returned") end
if package.loaded.deep0 ~= nil then print("ESCAPED: a failed require left package.loaded.deep0") end
-- Two files requiring each other (a loop stock Lua does not detect either).
f = assert(io.open("/tmp/la.lua", "w")) f:write("return require 'lb'") f:close()
f = assert(io.open("/tmp/lb.lua", "w")) f:write("return require 'la'") f:close()
require("la")
