-- expect: ok
-- Attack: the parser runs in C with no hook, so guest load caps its source at 1 MiB (the
-- module size limit), for strings and for reader functions (THREATS D9, 8.2): one byte more
-- is refused before anything is parsed, and a reader that never ends is cut off at the cap.
local src = "return 1" .. string.rep(" ", 1024 * 1024 + 1 - 8)
assert(#src == 1024 * 1024 + 1)
local ok, f, err = pcall(load, src, "big", "t")
if ok and f then error("load accepted a " .. #src .. "-byte chunk") end
assert(type(err) == "string" and err:find("at most 1048576", 1, true), err)
local calls = 0
local ok2, f2 = pcall(load, function() calls = calls + 1 return " or a" end, "reader", "t")
if ok2 and f2 then error("load accepted an endless reader") end
if calls > 1024 * 1024 / 5 + 2 then error("the endless reader was called " .. calls .. " times") end
-- A module-sized chunk (here 1 MiB exactly, minus the return) still loads and runs.
local g = load(src:sub(1, 1024 * 1024), "module", "t")
assert(g and g() == 1, "load of a module-sized chunk failed")
