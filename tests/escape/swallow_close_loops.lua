-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: a __close handler runs while the limit error unwinds, and loops forever (THREATS D6).
local ok = pcall(function()
  local guard <close> = setmetatable({}, {__close = function() while true do end end})
  while true do end
end)
print("ESCAPED: the __close handler let the run go on (pcall returned " .. tostring(ok) .. ")")
