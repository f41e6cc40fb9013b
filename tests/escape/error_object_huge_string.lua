-- expect: runtime_error
-- limits: memory=32M
-- Attack: a 4 MiB error message for the host to copy (THREATS D10, 8.9: truncated copies).
local s = "E"
for i = 1, 22 do s = s .. s end
error(s, 0)
