-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: the xpcall handler replaces the limit error with a harmless value (THREATS D6).
local ok, e = xpcall(function() while true do end end, function(e) return "handled" end)
print("ESCAPED: xpcall returned " .. tostring(ok) .. " " .. tostring(e))
while true do end
