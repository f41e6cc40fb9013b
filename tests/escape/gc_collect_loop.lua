-- expect: time_limit
-- accept: runtime_error, instruction_limit
-- limits: memory=64M instructions=0 time=300ms
-- Attack: a full collection is O(heap) in C; looping it on a big heap (THREATS D8, 8.11).
local keep = {}
for i = 1, 200000 do keep[i] = {i} end
while true do collectgarbage("collect") end
