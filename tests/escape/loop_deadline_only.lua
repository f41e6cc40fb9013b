-- expect: time_limit
-- limits: instructions=0 time=300ms
-- Attack: with no instruction limit only the wall-clock deadline can stop the loop (THREATS 8.14).
local n = 0
while true do n = n + 1 end
print("ESCAPED: the loop ended")
