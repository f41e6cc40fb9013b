-- expect: runtime_error
-- Attack: a returned table that contains itself: an encoder without cycle detection never ends
-- (THREATS section 4).
local t = {}
t[1] = t
t.self = {t}
return t
