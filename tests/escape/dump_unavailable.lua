-- expect: ok
-- Attack: string.dump leaks constants and makes bytecode; reach it directly, as a method and
-- through the string metatable (THREATS 0.6, E4, E10).
local function leak() return "secret" end
local candidates = {
  {"string.dump", string.dump},
  {"(\"\").dump", ("").dump},
  {"_G.string.dump", _G.string and _G.string.dump},
}
local smt = getmetatable("")
if type(smt) == "table" and type(rawget(smt, "__index")) == "table" then
  candidates[#candidates + 1] = {"getmetatable(\"\").__index.dump", smt.__index.dump}
end
for _, c in ipairs(candidates) do
  if c[2] ~= nil then
    print("ESCAPED: " .. c[1] .. " is available")
    local ok, code = pcall(c[2], leak)
    if ok and type(code) == "string" then print("ESCAPED: " .. c[1] .. " produced bytecode") end
  end
end
local ok = pcall(function() return ("x"):dump() end)
if ok then print("ESCAPED: (\"x\"):dump() ran") end
