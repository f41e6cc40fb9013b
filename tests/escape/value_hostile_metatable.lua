-- expect: ok
-- accept: runtime_error
-- limits: time=500ms
-- Attack: a returned table whose metamethods loop, for a host that converts results with
-- __pairs/__index/__len instead of raw access (THREATS section 4).
local function spin() while true do end end
local mt = {__index = spin, __len = spin, __pairs = spin, __eq = spin, __tostring = spin,
            __name = "hostile"}
return setmetatable({1, 2, 3, key = "v"}, mt), setmetatable({}, mt)
