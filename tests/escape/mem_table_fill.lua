-- expect: memory_limit
-- limits: memory=8M
-- Attack: an array grown one element at a time until the heap is exhausted (THREATS D10).
local t, i = {}, 1
while true do t[i] = i; i = i + 1 end
