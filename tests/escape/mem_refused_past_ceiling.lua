-- expect: memory_limit
-- limits: memory=8M time=2s
-- Attack: one instruction asks for more than the hard ceiling (1.25 * limit + 1 MiB); Lua then
-- runs its emergency collection and raises a catchable "not enough memory". The refusal must
-- still end the run: pcall cannot swallow it (THREATS P0 item 8).
local s = "x"
for _ = 1, 22 do s = s .. s end -- 4 MiB
for _ = 1, 50 do
  pcall(function() return s .. s .. s .. s .. s .. s end)
end
print("ESCAPED: kept running after a refused allocation")
