-- expect: ok
-- limits: memory=8M time=60s
-- (the time limit is generous: the test is about fragmentation; on a loaded machine 200 rounds
-- took more than 10 s)
-- Attack: fragment the sandbox's arena on purpose (issues 3 and 9, C.1): live data stays under
-- the memory limit, but each round frees its blocks at one size and the next round asks for a
-- larger one. With per-size free lists the slot ran out (and the process's RSS reached 8x the
-- limit); the coalescing allocator merges the freed blocks and serves every later size from
-- them, so all 200 rounds fit. What fragmentation remains is charged (resident pages), never
-- past the ceiling; tests/vm/test_rss.c measures the process's RSS for the same attack.
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
