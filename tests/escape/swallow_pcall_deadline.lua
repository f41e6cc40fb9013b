-- expect: time_limit
-- limits: instructions=0 time=300ms
-- Attack: pcall catches the deadline error and the loop starts again (THREATS 0.4, D6).
local said = false
while true do
  pcall(function() while true do end end)
  if not said then
    said = true
    print("ESCAPED: pcall swallowed the deadline")
  end
end
