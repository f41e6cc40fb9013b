-- expect: runtime_error
-- error-contains: stack overflow
-- Attack: recursion through pcall nests C calls 1000 deep; Lua stops at 200 and the sandbox
-- thread's C stack must hold that (THREATS 1, D12, 8.10).
local function f(n)
  if n == 0 then return "bottom" end
  local ok, v = pcall(f, n - 1)
  if not ok then error(v, 0) end
  return v
end
f(1000)
print("ESCAPED: 1000 nested pcalls")
