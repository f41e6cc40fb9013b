-- expect: runtime_error
-- limits: memory=32M
-- Attack: a 4 MiB chunk name for load, which ends up in the error and traceback the host copies
-- into fixed-size fields (THREATS section 4, 8.9).
local name = "@"
for i = 1, 22 do name = name .. "n" .. name:sub(2) end
local f = assert(load("local x = nil; return x.y", name, "t"))
f()
