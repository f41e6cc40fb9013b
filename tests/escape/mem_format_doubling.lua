-- expect: memory_limit
-- limits: memory=8M
-- Attack: string.format("%s%s") doubling big strings in C (THREATS D10, 8.6 pre-checks).
local s = "x"
while true do s = string.format("%s%s", s, s) end
