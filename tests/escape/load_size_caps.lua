-- expect: ok
-- limits: time=1s
-- Attack: the parser is O(n^2) on `a or a or ...` and runs in C with no hook; guest load must
-- cap its source at 16 KiB, for strings and for reader functions (THREATS D9, 8.2).
local term = " or a"
local src = "return a"
while #src < 600 * 1024 do src = src .. src:sub(9) .. term end -- ~600 KiB, ~120k terms
local ok, f = pcall(load, src, "bomb", "t")
if ok and f then error("load accepted a " .. #src .. "-byte chunk") end
-- A reader that never ends: it must be cut off at the cap, not run until a limit.
local calls = 0
local ok2, f2 = pcall(load, function() calls = calls + 1 return " or a" end, "reader", "t")
if ok2 and f2 then error("load accepted an endless reader") end
if calls > 20000 then error("the endless reader was called " .. calls .. " times") end
-- A small chunk still loads.
local g = load("return 1 + 1", "small", "t")
assert(g and g() == 2, "load of a small chunk failed")
