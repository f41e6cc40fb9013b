-- expect: time_limit
-- limits: time=1s
-- Attack: a 1 MiB `a or a or ...` chunk through guest load: Lua's code generator walks the
-- whole jump list at each `or`, minutes of C with no hook. vm/load.c hands the parser
-- pieces that shrink as the parse goes on, so the deadline is seen within milliseconds.
local parts = {"return a"}
for i = 1, 1024 * 1024 / 5 - 2 do parts[#parts + 1] = " or a" end
local src = table.concat(parts)
local f = load(src, "bomb", "t")
print("ESCAPED: a 1 MiB or-chain parsed within the deadline: " .. tostring(f))
