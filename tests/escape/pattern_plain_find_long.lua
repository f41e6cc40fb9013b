-- expect: time_limit
-- accept: memory_limit
-- limits: memory=128M instructions=0 time=100ms
-- Attack: plain find of a near-miss needle in a 32 MiB subject, over and over: glibc's memmem
-- costs up to ~8 ns a byte on such input, so one unwindowed call would run ~0.25 s past the
-- deadline (THREATS 0.2, lmemfind).
local s = "a"
for i = 1, 25 do s = s .. s end
local needle = "a"
for i = 1, 7 do needle = needle .. needle end
needle = "b" .. needle .. "b"
while true do string.find(s, needle, 1, true) end
