-- expect: memory_limit
-- accept: ok
-- limits: memory=8M time=3s
-- Attack: fragment the sandbox's arena on purpose (issue 3): live data stays under the memory
-- limit, but each round leaves its freed blocks in one small-size class that the next round
-- (a larger class) cannot reuse, so the slot itself runs out. The slot must refuse cleanly
-- (a sticky memory_limit), never crash, fault on its guard region or pass the ceiling.
-- Sanitizer builds give every block its own malloc (no slot to fragment): there it ends ok.
-- tests/vm/test_arena.c checks the refusal itself at the allocator level.
local function str(n)
  local s, p = "", "x"
  while n > 0 do
    if n % 2 == 1 then s = s .. p end
    p = p .. p
    n = n // 2
  end
  return s
end
for k = 1, 200 do
  local size = k * 16
  local proto = str(size)
  local t = {}
  for i = 1, (3 * 1024 * 1024) // (size + 48) do t[i] = proto .. i end
  t = nil
  collectgarbage("collect")
end
print("survived 200 rounds of fragmentation")
