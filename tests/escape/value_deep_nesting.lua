-- expect: runtime_error
-- Attack: a returned value nested 10,000 deep: a recursive JSON encoder would overflow the C
-- stack (THREATS section 4: depth caps).
local t = {}
for i = 1, 10000 do t = {t} end
return t
