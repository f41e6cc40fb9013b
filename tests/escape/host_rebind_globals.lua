-- expect: runtime_error
-- error-contains: final error
-- limits: time=500ms
-- Attack: rebind the globals a host might call after the run (tostring, error, pairs, next, type,
-- print...) and booby-trap _G itself, then fail: the host must format the error in C on raw
-- values, never through these (THREATS E7, section 4).
local raise, setmt = error, setmetatable
local function spin() while true do end end
for _, name in ipairs({"tostring", "tonumber", "error", "pairs", "ipairs", "next", "type",
                       "print", "rawget", "rawset", "select", "getmetatable", "setmetatable",
                       "pcall", "xpcall", "assert", "load", "rawlen", "rawequal"}) do
  _G[name] = spin
end
string.format = spin
string.sub = spin
setmt(_G, {__index = spin, __newindex = spin, __len = spin, __pairs = spin})
raise("final error", 0)
