-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: endless tail recursion: a loop made of calls, with no stack growth (THREATS D6).
local function f(n) return f(n + 1) end
f(0)
print("ESCAPED: the recursion ended")
