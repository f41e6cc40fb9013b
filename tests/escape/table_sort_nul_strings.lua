-- expect: time_limit
-- limits: memory=64M instructions=0 time=1s
-- Attack: table.sort of long strings of NULs, where one comparison costs a strcoll per byte
-- and the deadline was looked at every 256 comparisons whatever they cost: 27 s for a 3 s
-- limit (issue 9, B.3). Comparisons are now charged by the length of the shorter string.
local s = "\0"
for _ = 1, 24 do s = s .. s end -- 16 MiB of NULs
local a, b = s .. "\1", s .. "\2"
s = nil
-- Elements may share one string: 300 references to two of them, every comparison 0.13 s.
local t = {}
for i = 1, 300 do t[i] = i % 2 == 0 and a or b end
while true do
  table.sort(t)
end
