-- expect: instruction_limit
-- limits: instructions=1e6 time=2s
-- Attack: the a?^n a^n bomb with only an instruction limit in play: matching steps are charged
-- as instructions, so it stops long before the deadline (THREATS D1, 8.6).
local s, q = "", ""
for i = 1, 30 do s = s .. "a" q = q .. "a?" end
local r = string.find(s, q .. s)
print("ESCAPED: the match finished", r)
