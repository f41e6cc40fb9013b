-- expect: ok
-- Attack: a __gc finalizer runs with hooks off and cannot be interrupted (THREATS 0.3, D5):
-- one that loops forever, on objects collected during the run and on objects still alive
-- when the sandbox is freed. setmetatable accepts __gc (getmetatable shows it) and never
-- arms it: the metatable the VM uses never holds __gc (SECURITY-MODEL row 4).
local mt = {__gc = function() print("ESCAPED: finalizer ran") while true do end end}
local keep = setmetatable({}, mt)
for i = 1, 1000 do setmetatable({}, mt) end
collectgarbage()
collectgarbage()
for i = 1, 200000 do local _ = {i} end
assert(getmetatable(keep) == mt and getmetatable(keep).__gc == mt.__gc)
KEEP = keep -- alive when the sandbox is freed: no finalizer at teardown either
