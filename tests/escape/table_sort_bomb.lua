-- expect: time_limit
-- limits: instructions=0 time=100ms
-- Attack: table.sort runs in C and calls a __lt metamethod that never returns; the guest
-- loop inside it must still meet the deadline, and pcall must not swallow the trip
-- (THREATS D4, D6).
local mt = {__lt = function(a, b) while true do end end}
local t = {}
for i = 1, 100 do t[i] = setmetatable({}, mt) end
pcall(table.sort, t)
print("ESCAPED: sort with a looping __lt returned")
