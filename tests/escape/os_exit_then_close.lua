-- expect: time_limit
-- runs: 2
-- limits: time=300ms
-- Attack: os.exit() is a sticky trip that does not poison the sandbox, so a later run can
-- reach coroutines that were live when it fired. One with a pending __close that loops is
-- closed in the next run: its handler must run under the hook, not with hooks left off by
-- the trip's unwinding (the hang would outlive every deadline).
if not parked then
  parked = coroutine.create(function()
    local guard <close> = setmetatable({}, {__close = function() while true do end end})
    coroutine.yield()
  end)
  coroutine.resume(parked)
  dead = coroutine.create(function()
    local guard <close> = setmetatable({}, {__close = function() while true do end end})
    local inner = coroutine.wrap(function() os.exit() end)
    inner()
  end)
  coroutine.resume(dead)
  print("ESCAPED: os.exit() returned")
else
  coroutine.close(dead)
  coroutine.close(parked)
  print("ESCAPED: a looping __close finished")
end
