-- expect: ok
-- Attack: reach moonbox's own upvalues through debug (setmetatable's event names, the
-- pcall handler, the iterators' closures) to read them, replace them or join a Lua function
-- to them; then use a changed setmetatable to plant __gc (finalizers run unmetered).
local cfuncs = {setmetatable, getmetatable, pcall, xpcall, tostring, print, load, ipairs, pairs,
                next, string.gsub, string.format, table.sort, table.concat, coroutine.wrap,
                coroutine.resume, json.encode, json.decode, require, debug.getmetatable,
                debug.setmetatable, debug.traceback, utf8.codes, io.write}
local mine = function() return cfuncs end
for i, f in ipairs(cfuncs) do
  for n = 1, 40 do
    if select("#", debug.getupvalue(f, n)) > 0 then print("ESCAPED: upvalue " .. n .. " of C function " .. i) end
    if pcall(debug.setupvalue, f, n, "__gc") then print("ESCAPED: setupvalue on C function " .. i) end
    if pcall(debug.upvalueid, f, n) then print("ESCAPED: upvalueid of C function " .. i) end
    if pcall(debug.upvaluejoin, mine, 1, f, n) then print("ESCAPED: joined to C function " .. i) end
    if pcall(debug.upvaluejoin, f, n, mine, 1) then print("ESCAPED: joined C function " .. i) end
  end
  local info = debug.getinfo(f, "fu")
  if info.func ~= nil then print("ESCAPED: getinfo(C function).func") end
end
-- The policy still holds.
local ok = pcall(setmetatable, {}, {__gc = function() while true do end end})
local ok2 = pcall(debug.setmetatable, {}, {__gc = function() while true do end end})
if ok ~= ok2 then print("ESCAPED: debug.setmetatable differs from setmetatable on __gc") end
-- The string metatable cannot be replaced or reached for writing.
if pcall(debug.setmetatable, "", {__index = function() return "ESCAPED" end}) then
  print("ESCAPED: debug.setmetatable on a string")
end
if pcall(debug.setmetatable, 1, {}) then print("ESCAPED: debug.setmetatable on a number") end
if pcall(debug.setmetatable, print, {}) then print("ESCAPED: debug.setmetatable on a function") end
local smt = debug.getmetatable("")
if type(smt) == "table" then
  pcall(function() smt.__index = function() return "ESCAPED" end end)
end
print(("x"):upper())
