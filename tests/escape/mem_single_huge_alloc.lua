-- expect: memory_limit
-- limits: memory=8M
-- Attack: one instruction that asks for far more than the ceiling at once (a 24 MiB concat of a
-- 4 MiB string under an 8 MiB limit): the peak must stay under 1.25 x limit + 1 MiB (THREATS 8.8).
local s = "h"
for i = 1, 22 do s = s .. s end
local t = s .. s .. s .. s .. s .. s
print("ESCAPED: a " .. #t .. "-byte string was built under an 8 MiB limit")
