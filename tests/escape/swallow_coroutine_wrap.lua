-- expect: time_limit
-- limits: instructions=0 time=300ms
-- Attack: a coroutine.wrap function hits the deadline and pcall around it catches it (THREATS D6).
local said = false
while true do
  local ok = pcall(coroutine.wrap(function() while true do end end))
  if not said then
    said = true
    print("ESCAPED: the wrapped coroutine's deadline error was caught")
  end
end
