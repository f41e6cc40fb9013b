-- expect: host_call_limit
-- host-functions: on
-- limits: instructions=1e7
-- error-contains: host call limit exceeded
-- Attack: a native function is C code reached from the guest, so every value must arrive
-- Checked. Integers that do not fit the declared width (wrapping 300 to 44, 1.5 to 1), values
-- that only look like numbers (strings, tables with metamethods), NaN and infinities, huge
-- argument lists. Each must be a catchable error naming the argument, never a wrapped value
-- reaching C; and native calls count as host calls, so a loop of
-- them ends on MBX_LIMIT_HOST_CALLS like any host function.
local function refused(f, ...)
  local ok, e = pcall(f, ...)
  if ok then print("ESCAPED: accepted", ...) end
  return tostring(e)
end

assert(host.hypot(3, 4) == 5.0)
assert(host.int8(-128) == -128 and host.int8(127) == 127 and host.int8(3.0) == 3)
for _, v in ipairs({128, -129, 300, 256, 2^63, -2^63 - 1025, math.maxinteger, math.mininteger,
                    1.5, -0.5, 1/0, -1/0, 0/0}) do
  local e = refused(host.int8, v)
  assert(e:find("host.int8: argument #1", 1, true), e)
end
local looks_like_a_number = setmetatable({}, {
  __index = function() return 1 end, __tostring = function() return "1" end,
  __add = function() return 1 end, __name = "number"})
for _, v in ipairs({"4", "0x10", looks_like_a_number, true, print, coroutine.create(print)}) do
  local e = refused(host.hypot, 1, v)
  assert(e:find("host.hypot: argument #2 must be a number", 1, true), e)
end
local e = refused(host.hypot, table.unpack({}, 1, 5000))
assert(e:find("too many arguments", 1, true), e)
-- NaN and infinities are doubles: they pass to a 'd' argument as they are.
assert(host.hypot(1/0, 0) == 1/0)
assert(host.hypot(0/0, 1) ~= host.hypot(0/0, 1))
-- From a coroutine too.
assert(coroutine.wrap(function() return host.hypot(6, 8) end)() == 10.0)
-- Every call above counted; the loop ends on the host call limit (1000), which pcall
-- cannot swallow.
while true do pcall(host.hypot, 1, 1) end
