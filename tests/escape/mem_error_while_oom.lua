-- expect: memory_limit
-- limits: memory=8M
-- Attack: raise errors that need memory while the heap is exhausted: a handler that allocates,
-- a __close that raises a big message, then a plain error (THREATS section 4, 25da574f).
local big = "e"
for i = 1, 20 do big = big .. big end -- 1 MiB
local hold = {}
local ok, e = xpcall(function()
  local guard <close> = setmetatable({}, {__close = function() error(big .. big .. big, 0) end})
  local i = 0
  while true do i = i + 1; hold[i] = {i} end
end, function(msg)
  local s = big
  while true do s = s .. s end
end)
print("ESCAPED: the run went on after running out of memory")
error(big .. tostring(e))
