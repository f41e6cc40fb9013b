-- tests/compat/errors.lua: error behaviour of the main chunk and of library calls that must
-- match stock lua5.4 byte for byte (issue 9, F.1-F.7). Run by run_compat.sh in both.
-- Only what the sandbox allows: no refused collectgarbage options, no addresses, no pairs order.

local function show(...)
  local t = table.pack(...)
  local parts = {}
  for i = 1, t.n do parts[i] = tostring(t[i]) end
  print(table.concat(parts, " | "))
end

-- F.1: yields from the main chunk are errors the chunk can catch.
show(pcall(coroutine.yield))
show(pcall(coroutine.yield, 1, 2))
show(xpcall(coroutine.yield, function(m) return "handled: " .. m end))
show(pcall(function() coroutine.yield("x") end))
show(pcall(function() local t = {pcall(coroutine.yield)} return t[1], t[2] end))
show(select("#", pcall(coroutine.yield)))
-- Inside a real coroutine, yield still works through pcall.
do
  local co = coroutine.create(function(a)
    local ok, b = pcall(coroutine.yield, a + 1)
    return ok, b
  end)
  show(coroutine.resume(co, 1))
  show(coroutine.resume(co, 10))
end
show(coroutine.isyieldable())
show(coroutine.wrap(function() return coroutine.isyieldable() end)())
-- A coroutine that yielded inside xpcall (and pcall) closes as in stock Lua once those calls
-- have returned, normally or with a caught error (moonbox counts xpcall frames per thread
-- to refuse closing a coroutine suspended inside one: Lua 5.4.4 bug 3fe7be95).
do
  local function h(m) return "h:" .. tostring(m) end
  local co = coroutine.create(function()
    local c <close> = setmetatable({}, {__close = function(_, e) print("closed", e) end})
    show(xpcall(coroutine.yield, h, 1))
    show(xpcall(function() coroutine.yield(2) error("late", 0) end, h))
    show(xpcall(function() return pcall(xpcall, coroutine.yield, h, 3) end, h))
    coroutine.yield(4)
    print("never")
  end)
  show(coroutine.resume(co))
  show(coroutine.resume(co, "a"))
  show(coroutine.resume(co))
  show(coroutine.resume(co, "b"))
  show(coroutine.status(co), coroutine.close(co), coroutine.status(co))
  local p = coroutine.create(function() return pcall(coroutine.yield, 5) end)
  show(coroutine.resume(p))
  show(coroutine.close(p))
end

-- F.2: C functions reached without a name at the call site.
show(pcall(setmetatable, 1))
show(pcall(getmetatable))
show(pcall(rawlen, 1))
show(pcall(rawget, 1))
show(pcall(select, 0))
show(pcall(tonumber, 1, 99))
show(pcall(ipairs))
show(pcall(pcall))
show(pcall(xpcall))
show(pcall(error))
show(pcall(load))
show(pcall(string.rep))
show(pcall(table.concat, 1))
show(pcall(math.floor, "x"))
show(pcall(coroutine.create, 1))

-- F.3: string.format errors: position, 'format', method calls shift the argument number.
show(pcall(string.format, "%d", "x"))
show(pcall(function() return string.format("%d", "x") end))
show(pcall(function() return ("%d"):format("x") end))
show(pcall(function() return ("%d %s"):format(1) end))
show(pcall(function() return string.format("%y", 1) end))
show(pcall(function() return string.format("%10.123f", 1) end))
show(pcall(function() return string.format("%d", 1.5) end))
show(pcall(function() return string.format() end))
show(pcall(function() local s = "%c%c" return s:format(65) end))
show(string.format("%5.2f|%-4d|%s|%q", 3.14159, 7, "ok", "a\nb"))

-- F.4: coroutine functions expect a thread.
show(pcall(coroutine.resume, 1))
show(pcall(coroutine.close, {}))
show(pcall(coroutine.isyieldable, "x"))
show(pcall(coroutine.status, nil))
show(pcall(function() return coroutine.resume(nil) end))

-- F.5: an unknown collectgarbage option.
show(pcall(collectgarbage, "nooption"))
show(pcall(function() return collectgarbage("bogus") end))
show(type(collectgarbage("count")))

-- F.6: load converts a number chunk to a string.
show(load(1))
show(load(12.5))
show(pcall(load, {}))
show(pcall(load, nil))
show(load(42, "=num"))

-- F.7: to-be-closed variables are closed when the chunk fails (here inside pcall; the
-- uncaught case is in tests/stdlib and tests/escape).
show(pcall(function()
  local a <close> = setmetatable({}, {__close = function(_, e) print("closed a", e) end})
  local b <close> = setmetatable({}, {__close = function(_, e) print("closed b", e) end})
  error("boom")
end))
show(pcall(function()
  local a <close> = setmetatable({}, {__close = function(_, e) error("from close", 0) end})
  error("boom")
end))
