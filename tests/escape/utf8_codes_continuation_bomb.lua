-- expect: instruction_limit
-- limits: memory=64M instructions=3e6 time=60s
-- Attack: utf8.codes's iterator, called directly at position 0 of 16 MiB of stray
-- continuation bytes, skips them all in one C call: stock 5.4.4 does that unmetered (about
-- 12 ms of C for one VM instruction, so 3e6 instructions buy hours). The skip is charged per
-- byte like utf8.len's scan (THREATS D, DESIGN decision 3).
local s = "\x80"
while #s < 16 * 1024 * 1024 do s = s .. s end
local f = utf8.codes(s)
for i = 1, 1000 do f(s, 0) end
print("ESCAPED: 1000 unmetered scans of 16 MiB")
