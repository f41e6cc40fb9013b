-- expect: output_limit
-- limits: memory=32M
-- Attack: a returned table with 500,000 entries: the JSON text is charged to the guest or
-- refused, never built unbounded on the host (THREATS D10). Its 3.4 MB of JSON pass the
-- default 1 MiB output limit, which bounds the result too (issue 9, C.3).
local t = {}
for i = 1, 500000 do t[i] = i end
return t
