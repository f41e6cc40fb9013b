-- expect: runtime_error
-- accept: time_limit
-- limits: time=500ms
-- Attack: an error object whose __tostring loops: a host that formats it with luaL_tolstring
-- outside the budget hangs (THREATS section 4, 0.6).
error(setmetatable({}, {__tostring = function() while true do end end}))
