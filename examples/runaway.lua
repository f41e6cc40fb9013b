-- A runaway snippet: it chatters, hoards memory and never ends. Whichever limit is tightest
-- stops it, and the host gets a precise status instead of a hung or crashed process.
local hoard = {}
for i = 1, math.huge do
  hoard[#hoard + 1] = "item number " .. i
  if i % 100 == 0 then print("still working on", i) end
end
