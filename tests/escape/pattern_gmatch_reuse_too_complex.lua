-- expect: ok
-- Attack: Debian's gmatch iterator keeps its recursion counter spent after "pattern too
-- complex", and the next call recurses without limit: SIGSEGV (upstream efddc230, THREATS 0.1).
-- Here every call starts afresh: it raises the same error again, and never crashes.
local s, q = "", ""
for i = 1, 300 do s = s .. "a" q = q .. "a?" end
local it = string.gmatch(s, q .. "b")
for i = 1, 5 do
  local ok, e = pcall(it)
  assert(not ok and e == "pattern too complex", tostring(e))
end
-- A deep but legal pattern in a fresh iterator still works.
local n = 0
for w in string.gmatch(s .. "b", "a?a?a?b") do n = n + 1 end
assert(n == 1)
return "survived"
