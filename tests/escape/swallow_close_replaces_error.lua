-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: a __close handler raises its own error, replacing the limit error under pcall (THREATS D6).
local ok, e = pcall(function()
  local guard <close> = setmetatable({}, {__close = function() error("replaced", 0) end})
  while true do end
end)
print("ESCAPED: the limit error was replaced by: " .. tostring(e))
while true do end
