-- expect: instruction_limit
-- limits: instructions=1e6 time=2s
-- Attack: a coroutine trips the limit inside its own pcall, whose __close handler loops; the
-- coroutine recovers in C (precover) with a pending tbc variable (THREATS D6, 8.7).
local co = coroutine.create(function()
  pcall(function()
    local guard <close> = setmetatable({}, {__close = function() while true do end end})
    while true do end
  end)
  while true do end
end)
coroutine.resume(co)
coroutine.close(co)
print("ESCAPED: coroutine.resume/close returned after the limit")
