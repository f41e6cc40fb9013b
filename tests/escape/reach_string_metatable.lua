-- expect: ok
-- Attack: the one string metatable of a state: read it, replace its __index, rawset into it,
-- and patch the string library it points at (THREATS E6, 8.3, Redis CVE-2025-46818).
local smt = getmetatable("")
if type(smt) == "table" then
  pcall(function() smt.__index = {upper = function() return "ESCAPED: __index replaced" end} end)
  pcall(rawset, smt, "__index", {upper = function() return "ESCAPED: __index rawset" end})
  pcall(rawset, smt, "__len", function() return 0 end)
  pcall(setmetatable, smt, {})
end
pcall(setmetatable, "", {})
pcall(function() string.upper = function() return "ESCAPED: string.upper patched" end end)
pcall(rawset, string, "lower", function() return "ESCAPED: string.lower rawset" end)
local r1 = ("abc"):upper()
local r2 = ("ABC"):lower()
if r1 ~= "ABC" then print("ESCAPED: method call hijacked: " .. tostring(r1)) end
if r2 ~= "abc" then print("ESCAPED: method call hijacked: " .. tostring(r2)) end
if #"abc" ~= 3 then print("ESCAPED: string length hijacked") end
-- The metatable must not lead to a table holding dump or anything outside the curated library.
if type(smt) == "table" then
  local idx = rawget(smt, "__index")
  if type(idx) == "table" and (idx.dump or idx.load or idx.require) then
    print("ESCAPED: the string metatable leads to dump/load/require")
  end
end
