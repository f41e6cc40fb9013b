-- expect: time_limit
-- limits: instructions=0 time=100ms
-- Attack: ('a?'):rep(30)..('a'):rep(30) against ('a'):rep(30) backtracks 2^30 times inside one
-- C call, where the count hook never fires; stock 5.4.4 runs for seconds (THREATS 0.2, D1).
local s, q = "", ""
for i = 1, 30 do s = s .. "a" q = q .. "a?" end
local r = string.find(s, q .. s)
print("ESCAPED: the match finished", r)
