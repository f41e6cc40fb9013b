-- expect: ok
-- accept: runtime_error, memory_limit
-- limits: memory=32M
-- Attack: a returned table with 500,000 entries: the JSON text is charged to the guest or
-- refused, never built unbounded on the host (THREATS D10).
local t = {}
for i = 1, 500000 do t[i] = i end
return t
