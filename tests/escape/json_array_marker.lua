-- expect: ok
-- input: {"a": [], "b": []}
-- Attack: decoded empty arrays share one metatable set from C; if the guest could reach it,
-- __concat/__mode/__gc added there would arm on every decoded array, past setmetatable's
-- policy (THREATS P0 item 4: the luaV_concat and luaV_finishset bugs).
local m = getmetatable(a)
assert(type(m) == "table" and m.__jsontype == "array", "the decoy keeps the array marker")
m.__concat = function() return "ESCAPED: __concat through the array marker" end
m.__mode = "k"
m.__index = function() return "ESCAPED: __index through the array marker" end
local ok, r = pcall(function() return b .. "x" end)
if ok then print(r) end
if b.anything ~= nil then print(b.anything) end
-- The marker is replaceable: the guest's own metatable goes through the normal policy.
setmetatable(a, {__index = {z = 1}})
assert(a.z == 1)
setmetatable(b, {__concat = print})
assert(not pcall(function() return b .. "x" end), "__concat must still be refused at use")
