-- expect: ok
-- Attack: Lua 5.4.4 bug 7923dbbf (fixed in 5.4.7; Debian's package lacks it). An error at the end
-- of `x.a.a.a...` makes Lua name the value by walking back through the chain, one C recursion
-- per `.a` (about 100 bytes of C stack each): 100,000 links overflow an 8 MiB C stack, 12,000 a
-- 1 MiB one (stock lua5.4 and moonbox before the guard: SIGSEGV). A 16 KiB load holds 8,000,
-- enough on the smallest thread stack the docs allow. moonbox refuses to compile a function
-- whose chain is deeper than 200 (vm/load.c); tests/vm/test_load.c runs the 100,000-link one.
local function chain(n)
  return "local x = {} x.a = x return x" .. string.rep(".a", n) .. " + 1"
end

local f, err = load(chain(8000))
if f then
  local ok, e = pcall(f) -- the attack: the error message's walk, 8,000 C frames deep
  error("ESCAPED: an 8,000-link chain compiled and ran: " .. tostring(e))
end
assert(err:find("expression too complex", 1, true), err)
assert(err:find('^%[string "local x = {} x%.a = x return x%.a%.a'), err)

-- Real chains compile and name their values as stock does.
local ok, e = pcall(assert(load(chain(150))))
assert(not ok and e:find("attempt to perform arithmetic on a table value (field 'a')", 1, true), e)

-- A long walk through a named local stops at the local, in Lua as in the bound: not refused.
local parts = {"local n = {} n.next = n"}
for _ = 1, 400 do parts[#parts + 1] = "n = n.next" end
parts[#parts + 1] = "return n.next.x + 1"
local ok2, e2 = pcall(assert(load(table.concat(parts, "\n"))))
assert(not ok2 and e2:find(":402: attempt to perform arithmetic on a nil value (field 'x')", 1, true), e2)

-- A nested function's chain is refused with its chunk.
local g, err2 = load("return function() " .. chain(7000) .. " end")
assert(not g and err2:find("expression too complex", 1, true), err2)
print("refused")
