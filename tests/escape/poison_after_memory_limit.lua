-- expect: memory_limit
-- then: sandbox_poisoned
-- limits: memory=8M
-- Attack: the memory limit trips while a global keeps the heap full; the next run would start
-- already over the limit (THREATS E8, D10).
hold = {}
local s = "m"
while true do hold[#hold + 1] = s; s = s .. "m" .. #hold end
