-- expect: runtime_error
-- accept: memory_limit
-- limits: memory=64M time=5s
-- Attack: 20,000 chained coroutine.close calls, each __close closing the previous coroutine,
-- overflow the C stack of Debian's 5.4.4 (THREATS 0.1, upstream 1e64c139): must be an error.
local prev
for i = 1, 20000 do
  local p = prev
  local co = coroutine.create(function()
    local guard <close> = setmetatable({}, {__close = function()
      if p then
        local ok, err = coroutine.close(p)
        if not ok then error(err, 0) end
      end
    end})
    coroutine.yield()
  end)
  assert(coroutine.resume(co))
  prev = co
end
local ok, err = coroutine.close(prev)
if not ok then error(err, 0) end
print("closed a chain of 20000 coroutines without a nesting limit")
