-- expect: instruction_limit
-- limits: instructions=1e6 time=2s
-- Attack: a wrapped coroutine trips the limit with a looping __close pending; wrap's error path
-- closes the coroutine (lua_resetthread) while Lua still has that thread's hooks disabled after
-- the hook raised, so the __close loop would run unmetered (THREATS D6, 8.7).
local f = coroutine.wrap(function()
  local guard <close> = setmetatable({}, {__close = function() while true do end end})
  while true do end
end)
f()
print("ESCAPED: the wrapped coroutine's limit error was survived")
