-- expect: memory_limit
-- limits: memory=8M
-- Attack: millions of distinct small strings kept alive (THREATS D10).
local t, i = {}, 0
while true do i = i + 1; t[i] = "s" .. i end
