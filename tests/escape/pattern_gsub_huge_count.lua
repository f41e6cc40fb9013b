-- expect: time_limit
-- accept: memory_limit, instruction_limit
-- limits: memory=256M instructions=0 time=200ms
-- Attack: one gsub over a 32 MiB subject making 32 Mi replacements (each '%0%0'), with a huge
-- max count: tens of millions of steps and a 64 MiB result built in one C call (THREATS D1).
local s = "a"
for i = 1, 25 do s = s .. s end
local r, n = string.gsub(s, ".", "%0%0", math.maxinteger)
print("ESCAPED: gsub finished", #r, n)
