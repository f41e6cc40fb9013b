-- expect: time_limit
-- limits: memory=64M instructions=0 time=1s
-- Attack: `<` between long strings of NUL bytes runs one strcoll per byte inside one
-- instruction (about 8 ns a byte: 0.25 s for 32 MiB, here a string compared with itself);
-- with a hook every 32 instructions the loop overran a 3 s deadline to 10 s (issue 9,
-- B.3). The hook interval now shrinks with the live large bytes, down to every
-- instruction, so the overrun is one compare. 16 MiB here (0.13 s a compare when the machine
-- is quiet): with 32 MiB one compare under ASan on a loaded CI machine came close to the
-- bound by itself, while the old 32-instruction interval still overruns by about 4 s.
local s = "\0"
for _ = 1, 24 do s = s .. s end -- 16 MiB of NULs
local n = 0
while true do
  if s < s or s < s or s < s or s < s or s < s or s < s or s < s or s < s then n = n + 1 end
end
