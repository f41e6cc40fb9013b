-- expect: time_limit
-- accept: memory_limit
-- limits: memory=256M instructions=0 time=300ms
-- Attack: comparing two 32 MiB strings is one VM instruction of milliseconds of C; a hook
-- every 1000 instructions would let the loop overrun the deadline by seconds (THREATS D8).
local s = "a"
for i = 1, 25 do s = s .. s end -- 32 MiB
local a, b = s .. "1", s .. "2"
s = nil
local n = 0
while true do
  if a == b then n = n + 1 end
  if a < b then n = n + 1 end
end
