-- expect: ok
-- runs: 2
-- limits: time=500ms
-- Attack: run 1 booby-traps the REPL's globals (looping __index/__newindex on _G, rebound
-- tostring/print/error/pairs/next/type); the host must start and finish run 2 without calling
-- any of them (THREATS E7, E8).
if rawget(_G, "trapped") == nil then
  local function spin() while true do end end
  local set, rset = setmetatable, rawset
  for _, name in ipairs({"tostring", "print", "error", "pairs", "ipairs", "next", "type",
                         "select", "tonumber", "pcall", "xpcall", "load", "getmetatable"}) do
    _G[name] = spin
  end
  rset(_G, "trapped", true)
  set(_G, {__index = spin, __newindex = spin, __len = spin, __pairs = spin, __call = spin})
  return 1
end
return 2
