-- expect: ok
-- Attack: with levels mapped past moonbox's own C frames (5ec84b4), read the locals, the
-- function and the name of every level seen from inside a walker's __index function, a live
-- stub's handler, an xpcall message handler and a coroutine suspended in a stub's handler
-- (another thread: lua_getinfo(L1, "f") pushes on L1's stack). A C frame's registers hold the
-- clone, the guest's metatable and host pointers (light userdata): no level may yield them, and
-- no C function may be handed out (THREATS 3.4: debug as an escape hatch).
local seen = 0
local function check_levels(co)
  for level = 0, 12 do
    local info
    if co then info = debug.getinfo(co, level, "Sf") else info = debug.getinfo(level + 1, "Sf") end
    if not info then break end
    if info.what == "C" and info.func ~= nil then print("ESCAPED: a C level's function") end
    for n = -4, 40 do
      local name, v
      if co then name, v = debug.getlocal(co, level, n) else name, v = debug.getlocal(level + 1, n) end
      if name then
        seen = seen + 1
        if info.what == "C" then print("ESCAPED: a C level's local " .. tostring(name)) end
        if type(v) == "userdata" and io.type(v) == nil then
          print("ESCAPED: a light userdata at level " .. level)
        end
        if type(v) == "function" and debug.getinfo(v, "S").what == "C" and v ~= check_levels then
          local known = false
          for _, g in pairs(_G) do if g == v then known = true end end
          if not known then print("ESCAPED: an unknown C function at level " .. level) end
        end
      end
      if info.what == "C" and n > 0 and n < 3 then
        local ok
        if co then ok = pcall(debug.setlocal, co, level, n, "ESCAPED")
        else ok = pcall(debug.setlocal, level + 2, n, "ESCAPED") end -- pcall's frame between
        if ok then print("ESCAPED: a C level's local was set") end
      end
    end
  end
end
local mt = {}
local obj = setmetatable({}, mt)
-- A walker: __index added after setmetatable.
mt.__index = function(t, k)
  check_levels()
  local where = debug.getinfo(2, "l").currentline
  return where
end
local line = obj.anything
assert(line == debug.getinfo(1, "l").currentline - 1, "level 2 is the indexing line: " .. tostring(line))
-- A live stub: arithmetic, order, call added later.
mt.__add = function(a, b) check_levels() return 1 end
mt.__lt = function(a, b) check_levels() return true end
mt.__call = function(self, ...) check_levels() return ... end
assert(obj + 1 == 1 and (obj <= obj) == false and obj(5) == 5)
-- xpcall's guard around the handler.
xpcall(function() error("e") end, function(m) check_levels() return m end)
-- A coroutine suspended inside a stub's handler, read from outside.
mt.__sub = function(a, b) coroutine.yield() return 2 end
local co = coroutine.create(function() return obj - 1 end)
assert(coroutine.resume(co))
check_levels(co)
assert(select(2, coroutine.resume(co)) == 2)
assert(seen > 20, "locals were read: " .. seen)
return seen
