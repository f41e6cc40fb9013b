-- expect: instruction_limit
-- limits: instructions=5e6 time=10s
-- Attack: 500k tiny coroutines, each finishing between two hook calls, so a per-thread hook
-- count never charges them (THREATS 0.5, D7): ~5e7 instructions run against a 5e6 budget.
local function tiny()
  local x = 0
  for j = 1, 30 do x = x + j end
  return x
end
local wrap = coroutine.wrap
for i = 1, 500000 do wrap(tiny)() end
print("ESCAPED: 500000 coroutines ran uncharged")
