-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: coroutine.resume returns the limit error as a value; the loop starts again (THREATS D6).
local said = false
while true do
  local co = coroutine.create(function() while true do end end)
  local ok, e = coroutine.resume(co)
  if not said then
    said = true
    print("ESCAPED: resume returned " .. tostring(ok) .. " " .. tostring(e))
  end
end
