-- expect: time_limit
-- accept: instruction_limit
-- limits: instructions=0 time=200ms
-- Attack: '.-.-.-.-.-x' over a 64 KiB subject without an 'x' is O(n^5) steps in one C call
-- (THREATS D1); a pcall around it must not swallow the trip either.
local s = "ab"
for i = 1, 15 do s = s .. s end
for i = 1, 3 do pcall(string.find, s, ".-.-.-.-.-x") end
print("ESCAPED: the match finished")
