-- expect: ok
-- Attack: any non-nil __gc at setmetatable arms the finalizer in stock Lua, so `__gc = true`
-- now and a looping function later would run with hooks off (THREATS D5). Accepted, and the
-- swapped-in function never runs: the clone never holds __gc (SECURITY-MODEL row 4).
local mt = {__gc = true}
local t = setmetatable({}, mt)
mt.__gc = function() print("ESCAPED: finalizer ran") while true do end end
t = nil
collectgarbage()
collectgarbage()
for i = 1, 200000 do local _ = {i} end
