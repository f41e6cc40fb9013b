-- expect: instruction_limit
-- limits: instructions=5e6
-- Attack: error's and debug's level arguments are guest levels since 5ec84b4: each call scans
-- up to 256 frames to skip moonbox's own (a walker, a live stub, xpcall's guard), and each step
-- re-walks the stack from its top (lua_getstack is O(level)): about 33,000 frame steps in one
-- C call. With a deep stack, calls at the deepest levels, on this thread and on a suspended
-- coroutine, loop; the scan is charged, so the instruction limit ends the loop (uncharged,
-- 5e6 instructions would take about 40 s: the 2 s deadline would end it instead).
local mt = {}
local obj = setmetatable({}, mt)
local function deep(n, f) if n > 0 then return (deep(n - 1, f)) end return f() end
-- A suspended coroutine whose stack holds a live stub's frame (a late __add that yields).
mt.__add = function(a, b) coroutine.yield() return 1 end
local co = coroutine.create(function() return deep(240, function() return obj + 1 end) end)
assert(coroutine.resume(co))
assert(coroutine.status(co) == "suspended")
deep(240, function()
  while true do
    pcall(error, "x", 255)
    debug.getinfo(250, "l")
    debug.getinfo(co, 240, "l")
    debug.getlocal(co, 240, 1)
    debug.traceback(co, "m", 255)
  end
end)
print("ESCAPED: the loop ended")
