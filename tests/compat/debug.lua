-- tests/compat/debug.lua -- the debug idioms real libraries use (Penlight's compat.setfenv,
-- lume's tester, argparse's error paths), and the rest of the base library (warn,
-- collectgarbage's options), printed and compared byte for byte with stock lua5.4.

-- getinfo on Lua levels and functions, as a test helper reads it.
local function where()
  local info = debug.getinfo(2, "Sl")
  return info.short_src .. ":" .. info.currentline
end
print(where())
local function described(f)
  local i = debug.getinfo(f, "Su")
  return table.concat({i.what, i.linedefined, i.lastlinedefined, i.nups, i.nparams,
                       tostring(i.isvararg), i.short_src}, " ")
end
print(described(described))
print(described(function(...) return where end))
print(described(print))

-- Names as a caller sees them.
local obj = {}
function obj.method() return debug.getinfo(1, "n") end
function obj:self_method() return debug.getinfo(1, "n") end
local function named() local i = debug.getinfo(1, "n") return i end
local a, b, c = obj.method(), obj:self_method(), named()
print(a.name, a.namewhat, b.name, b.namewhat, c.name, c.namewhat)

-- Locals: iterate, read varargs, set.
local function locals(...)
  local x, y = 10, "twenty"
  local out = {}
  local i = 1
  while true do
    local name, value = debug.getlocal(1, i)
    if not name then break end
    if name:sub(1, 1) ~= "(" then out[#out + 1] = name .. "=" .. type(value) end
    i = i + 1
  end
  out[#out + 1] = "vararg=" .. tostring(select(2, debug.getlocal(1, -1)))
  debug.setlocal(1, 1, 11)
  out[#out + 1] = "x=" .. x
  return table.concat(out, " ")
end
print(locals("v"))
print(debug.getlocal(locals, 1), debug.getlocal(function(p, q) end, 2))

-- getfenv/setfenv emulation over upvalues, as Penlight's compat does it.
local function setfenv(f, env)
  local up = 0
  repeat
    up = up + 1
    local name = debug.getupvalue(f, up)
  until name == "_ENV" or name == nil
  if debug.getupvalue(f, up) then
    debug.upvaluejoin(f, up, function() return env end, 1)
  end
  return f
end
local function reads_global() return answer end
setfenv(reads_global, {answer = 42})
print(reads_global())
local counter = 0
local function bump() counter = counter + 1 return counter end
print(debug.getupvalue(bump, 1), debug.setupvalue(bump, 1, 100), bump())
print(debug.upvalueid(bump, 1) == debug.upvalueid(bump, 1))

-- Metatables through debug, for tables.
local t = debug.setmetatable({}, {__index = function(_, k) return k .. "!" end})
print(t.hi, debug.getmetatable(t) == getmetatable(t))
-- debug.getmetatable looks past __metatable (middleclass's specs read a class's instance
-- dictionary this way); getmetatable does not.
local protected_mt = {__metatable = "locked", __index = {x = 1}}
local p = setmetatable({}, protected_mt)
print(getmetatable(p), debug.getmetatable(p) == protected_mt, type(debug.getmetatable(p).__index))
print(debug.getmetatable(setmetatable({}, nil)), debug.getmetatable(1), debug.getmetatable(nil))
print(type(debug.getmetatable("")), debug.getmetatable("").__index == string)
-- and debug.setmetatable replaces a protected metatable, which setmetatable refuses.
print(pcall(setmetatable, p, {}))
local replaced = {__index = {y = 2}}
print(debug.setmetatable(p, replaced) == p, p.x, p.y, getmetatable(p) == replaced)
print(pcall(setmetatable, p, nil), getmetatable(debug.setmetatable(p, nil)))

-- traceback passes non-strings through.
local marker = {}
print(debug.traceback(marker) == marker, type(debug.traceback("x")))

-- The rest of the base library.
warn("@on")
warn("to stderr, not compared")
print(collectgarbage("isrunning"), collectgarbage("stop"), collectgarbage("isrunning"))
print(collectgarbage("restart"), collectgarbage("isrunning"))
print(collectgarbage("generational"), collectgarbage("incremental"),
      collectgarbage("incremental"))
print(collectgarbage("setpause", 200), collectgarbage("setstepmul", 100))
print(collectgarbage("collect"), math.type(collectgarbage("count")))
print(load(string.rep(" ", 20000) .. "return 'a 20 KB chunk'")())
