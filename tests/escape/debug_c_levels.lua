-- expect: ok
-- host-functions: on
-- Attack: read or write the locals of moonbox's C frames (vm/run.c's step record and
-- stdlib/hostcall.c's reply buffer are light userdata there) and get their closures, from
-- inside every callback a moonbox C function makes, on this thread and on coroutines.
local function info(th, level, what)
  if th then return debug.getinfo(th, level, what) end
  return debug.getinfo(level + 2, what)
end
local c_levels = 0
local function check_level(th, level)
  local i = info(th, level, "Sf")
  if not i then return false end
  if i.what == "C" then
    c_levels = c_levels + 1
    if i.func ~= nil then print("ESCAPED: the function of a C level") end
    for n = -4, 12 do
      if n ~= 0 then
        local name, v
        if th then name, v = debug.getlocal(th, level, n) else name, v = debug.getlocal(level + 1, n) end
        if name ~= nil then print("ESCAPED: local " .. tostring(name) .. " of a C level: " .. tostring(v)) end
      end
    end
    local ok
    if th then ok = pcall(debug.setlocal, th, level, 1, 0) else ok = pcall(debug.setlocal, level + 2, 1, 0) end
    if ok then print("ESCAPED: setlocal on a C level") end
  end
  return true
end
local function walk(th)
  for level = 1, 40 do
    if not check_level(th, level) then break end
  end
  -- Temporaries and any light userdata on the Lua levels.
  for level = 1, 40 do
    local i = info(th, level, "S")
    if not i then break end
    for n = 1, 60 do
      local name, v
      if th then name, v = debug.getlocal(th, level, n) else name, v = debug.getlocal(level + 1, n) end
      if name == "(C temporary)" or name == "(temporary)" then print("ESCAPED: a temporary is readable") end
      if type(v) == "userdata" and v ~= json.null then print("ESCAPED: a userdata local: " .. tostring(v)) end
    end
  end
end
local function probe() walk(nil) return true end
pcall(probe)
xpcall(probe, probe)
xpcall(error, probe)
table.sort({3, 1, 2, 5, 4}, function(a, b) probe() return a < b end)
string.gsub("abc", "%w", function() probe() end)
for _ in string.gmatch("ab", "()") do probe() end
coroutine.wrap(probe)()
load(function() probe() return nil end)
tostring(setmetatable({}, {__tostring = function() probe() return "x" end}))
string.format("%s", setmetatable({}, {__tostring = function() probe() return "x" end}))
table.concat(setmetatable({}, {__index = function() probe() return "x" end, __len = function() return 2 end}))
table.insert(setmetatable({}, {__newindex = function() probe() end, __len = function() return 0 end}), 1)
for _ in pairs(setmetatable({}, {__pairs = function() probe() return next, {} end})) do end
json.encode(setmetatable({}, {__index = function() probe() end}))
for _ in ipairs(setmetatable({}, {__index = function(_, i) probe() if i < 2 then return i end end})) do end
print(setmetatable({}, {__tostring = function() probe() return "" end}))
table.sort({setmetatable({}, {__lt = function() probe() return true end}), setmetatable({}, {__lt = function() probe() return true end})})
table.unpack(setmetatable({}, {__index = function() probe() end}), 1, 2)
table.move(setmetatable({}, {__index = function() probe() end}), 1, 2, 1, {})
local closing = coroutine.create(function() local c <close> = setmetatable({}, {__close = function() probe() end}) coroutine.yield() end)
coroutine.resume(closing)
coroutine.close(closing)
print(select("#", host.echo(1, 2)))
-- A coroutine suspended inside C functions (yield, pcall, xpcall), and one that died in a
-- comparator (its stack stays inspectable).
local co = coroutine.create(function()
  pcall(function()
    local x = 1
    xpcall(function() coroutine.yield(x) end, print)
  end)
end)
assert(coroutine.resume(co))
assert(debug.getinfo(co, 0, "S").what == "C")
walk(co)
local dead = coroutine.create(function()
  table.sort({2, 1}, function(a, b) error("in the comparator") end)
end)
coroutine.resume(dead)
walk(dead)
-- The run thread seen from a coroutine (its bottom level is the main chunk).
coroutine.wrap(function() walk(nil) end)()
-- Every callback above ran below at least one C level.
assert(c_levels >= 30, "only " .. c_levels .. " C levels were probed")
