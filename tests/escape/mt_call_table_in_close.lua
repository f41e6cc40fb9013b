-- expect: time_limit
-- limits: memory=64M instructions=0 time=1s
-- stdout-contains: refused
-- Attack: the looping __call reached from a __close handler while the stack unwinds after
-- the deadline: no instruction runs there, so the sticky trip cannot stop it (issue 9, B.1;
-- 273 s before the fix). Every way to make a table callable through a non-function is
-- tried; each must be refused, so closing calls a plain table (an error) and the run ends
-- on its deadline within twice the limit.
local t = {}
for _, call in ipairs({t, {}, "x", 1, true}) do
  if pcall(setmetatable, t, {__call = call}) then print("ESCAPED: __call =", type(call)) end
end
local inner = setmetatable({}, {__call = function() return t() end})
print(pcall(setmetatable, t, {__call = inner}) and "ESCAPED: __call = callable" or "refused")
local closer = setmetatable({}, {__close = t})
local wrapped = setmetatable({}, {__close = inner})
do
  local a <close> = closer
  local b <close> = wrapped
  while true do end
end
