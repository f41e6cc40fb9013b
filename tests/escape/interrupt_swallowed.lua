-- expect: interrupted
-- interrupt: 100ms
-- limits: instructions=0 time=5s
-- Attack: pcall, xpcall and coroutine.resume try to catch the interrupt (THREATS D6).
local said = false
while true do
  pcall(function() while true do end end)
  xpcall(function() while true do end end, function() return "ignored" end)
  coroutine.resume(coroutine.create(function() while true do end end))
  if not said then said = true; print("ESCAPED: the interrupt was swallowed") end
end
