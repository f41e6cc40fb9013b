-- expect: time_limit
-- accept: memory_limit
-- limits: memory=256M instructions=0 time=300ms
-- Attack: each concatenation copies 32 MiB in one instruction (THREATS D8).
local s = "b"
for i = 1, 24 do s = s .. s end -- 16 MiB
while true do
  local t = s .. s
  t = nil
end
