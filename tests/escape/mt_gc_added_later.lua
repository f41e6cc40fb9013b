-- expect: ok
-- Attack: a finalizer added to the metatable after setmetatable, then forced collections:
-- it must never run, during the run or when the sandbox is freed (THREATS 0.3, D5, 8.4).
local mt = {}
local t = setmetatable({}, mt)
mt.__gc = function()
  print("ESCAPED: a finalizer added later ran")
  while true do end
end
t = nil
pcall(collectgarbage, "collect")
pcall(collectgarbage, "collect")
-- Garbage churn drives ordinary GC cycles even if "collect" is refused.
for i = 1, 200000 do local _ = {i} end
