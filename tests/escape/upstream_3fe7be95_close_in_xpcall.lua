-- expect: runtime_error
-- error-contains: cannot close a coroutine suspended inside xpcall in this sandbox (Lua 5.4.4 bug 3fe7be95)
-- Attack: Lua 5.4.4 bug 3fe7be95 (fixed in 5.4.8; Debian's package lacks it). A coroutine
-- suspended inside xpcall keeps its message handler as a stack offset, and coroutine.close
-- (lua_resetthread) runs the pending __close handlers without clearing it. Here the handler
-- slot lies 20,000 calls deep while the __close runs at the bottom of the stack: its full
-- collection shrinks the stack, and its error then calls "the handler" at the stale offset,
-- past the end of the new stack (stock lua5.4: SIGSEGV; valgrind: a read inside the freed
-- old stack). moonbox refuses to close a coroutine suspended inside xpcall, at the call.
local co = coroutine.create(function()
  local guard <close> = setmetatable({}, {__close = function()
    collectgarbage("collect")
    error(134)
  end})
  local function deep(n)
    if n == 0 then
      return xpcall(coroutine.yield, function() return "handler" end)
    end
    return (deep(n - 1)) -- not a tail call: each level keeps its frame
  end
  deep(20000)
  print("ESCAPED: the coroutine was resumed")
end)
assert(coroutine.resume(co))
assert(coroutine.status(co) == "suspended")
local ok, err = coroutine.close(co)
error("ESCAPED: coroutine.close returned " .. tostring(ok) .. ", " .. tostring(err), 0)
