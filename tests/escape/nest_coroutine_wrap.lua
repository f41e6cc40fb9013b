-- expect: runtime_error
-- error-contains: stack overflow
-- Attack: recursion through coroutine.wrap: every level is a nested lua_resume (THREATS 1, D12,
-- CVE-2021-43519).
local function f(n)
  if n == 0 then return 0 end
  return coroutine.wrap(f)(n - 1) + 1
end
f(1000)
print("ESCAPED: 1000 nested coroutines")
