-- expect: ok
-- Attack: Lua 5.4.4 bug 997f11f5 (fixed in 5.4.5; Debian's package lacks it). A generic for
-- whose body captures a loop variable in a closure leaves its loop (by break or at its end)
-- with a CLOSE one register too high, so its closing value (the 4th value) is never closed and
-- stays on the thread's to-be-closed list. A later <close> variable at a lower register then
-- walks that list past the end of the stack, writing as it goes: stock lua5.4 dies with
-- SIGSEGV on this script. moonbox rewrites that CLOSE when it compiles (vm/load.c), so the
-- closing value is closed when the loop is left, as in Lua 5.4.5+.
local log = {}
local mt = {__close = function(o) log[#log + 1] = o.name end}
local function obj(name)
  return setmetatable({name = name}, mt)
end
local later = obj("later")

local function by_break()
  for k in next, {1, 2, 3}, nil, obj("loop1") do
    local function f() return k end
    break
  end
  log[#log + 1] = "after1"
  local y <close> = later -- a lower register than the stale entry: the runaway walk
  return 1
end

local function at_end()
  for k in next, {}, nil, obj("loop2") do
    local function f() return k end
    if f() then break end
  end
  log[#log + 1] = "after2"
  local y <close> = later
  return 2
end

assert(by_break() == 1)
assert(at_end() == 2)

-- The same through the guest's load, nested one function deeper.
local chunk = assert(load([[
  local obj, later, log = ...
  return function()
    for k in next, {1}, nil, obj("loop3") do
      local function f() return k end
      break
    end
    log[#log + 1] = "after3"
    local y <close> = later
    return 3
  end
]]))
assert(chunk(obj, later, log)() == 3)

local got = table.concat(log, " ")
local want = "loop1 after1 later loop2 after2 later loop3 after3 later"
if got ~= want then error("ESCAPED: closing order " .. got .. ", expected " .. want) end
print(got)
