-- expect: runtime_error
-- error-contains: __gc
-- Attack: any non-nil __gc arms the finalizer, so `__gc = true` now and a function later (THREATS D5).
local mt = {__gc = true}
local t = setmetatable({}, mt)
mt.__gc = function() print("ESCAPED: finalizer ran") while true do end end
print("ESCAPED: setmetatable accepted a __gc placeholder")
