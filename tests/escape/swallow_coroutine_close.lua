-- expect: instruction_limit
-- limits: instructions=1e6 time=5s
-- Attack: coroutine.close runs a looping __close and returns the limit error as a value (THREATS D6).
local co = coroutine.create(function()
  local guard <close> = setmetatable({}, {__close = function() while true do end end})
  coroutine.yield()
end)
assert(coroutine.resume(co))
local ok, e = coroutine.close(co)
print("ESCAPED: coroutine.close returned " .. tostring(ok) .. " " .. tostring(e))
while true do end
