-- expect: time_limit
-- limits: memory=64M instructions=0 time=300ms
-- max-wall: 900ms
-- Attack: `<` between two NUL strings just under the large-block size (256 KiB) runs one
-- strcoll per byte inside one instruction (l_strcmp), a few milliseconds each; strings that
-- small did not shorten the hook interval, so a thousand instructions between two hooks ran
-- for about a second past the deadline (found by tests/fuzz/fuzz_hostile.c). The interval now
-- follows the longest string from 8 KiB on; the run must end within 3x its deadline.
local s = string.rep("\0", 250000) .. "a"
local u = s .. "b"
local n = 0
while true do
  if s < u then n = n + 1 end
  if u > s then n = n + 1 end
end
