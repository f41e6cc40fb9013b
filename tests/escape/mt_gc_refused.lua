-- expect: runtime_error
-- error-contains: __gc
-- Attack: a __gc finalizer runs with hooks off and cannot be interrupted (THREATS 0.3, D5).
setmetatable({}, {__gc = function() print("ESCAPED: finalizer ran") while true do end end})
collectgarbage("count")
print("ESCAPED: setmetatable accepted __gc")
