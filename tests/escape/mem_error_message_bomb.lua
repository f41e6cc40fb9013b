-- expect: memory_limit
-- limits: memory=8M
-- Attack: an error message as large as the heap (THREATS D10: "error messages of 32 MB").
local s = "x"
for i = 1, 22 do s = s .. s end -- 4 MiB
error(s .. s .. s)
