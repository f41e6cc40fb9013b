-- expect: memory_limit
-- limits: memory=8M
-- Attack: a string doubled until the heap is exhausted (THREATS D10).
local s = "x"
while true do s = s .. s end
