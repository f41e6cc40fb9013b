-- expect: memory_limit
-- limits: memory=8M
-- Attack: pcall catches the out-of-memory error and the script retries (THREATS 0.4, D6, D10).
local said = false
while true do
  pcall(function() local s = "x" while true do s = s .. s end end)
  if not said then
    said = true
    print("ESCAPED: pcall swallowed the memory limit")
  end
end
