-- expect: time_limit
-- accept: instruction_limit, memory_limit
-- limits: instructions=0 time=100ms memory=8M
-- Attack: __index = rawlen is a C function, so table.concat over 2^53 indices runs no VM
-- instruction per element ("0" each time), and __len = rawlen makes #t cheap too
-- (THREATS D4).
local t = setmetatable({}, {__index = rawlen, __newindex = rawequal})
local ok, e = pcall(table.concat, t, "", 1, 2^53)
print("ESCAPED: table.concat returned", ok)
