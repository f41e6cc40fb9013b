-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: pcall catches the instruction-limit error and the loop starts again (THREATS 0.4, D6).
local said = false
while true do
  pcall(function() while true do end end)
  if not said then
    said = true
    print("ESCAPED: pcall swallowed the instruction limit")
  end
end
