-- expect: ok
-- Attack: use require to load host modules, C libraries or files (THREATS E1-E3):
-- package, ffi, socket, io/os by other names, paths, C symbols; plant package.preload and
-- package.loaded entries; replace the globals require might read.
local function contains(s, sub)
  for i = 1, #s - #sub + 1 do
    if s:sub(i, i + #sub - 1) == sub then return true end
  end
  return false
end
local refused = {"package", "ffi", "jit", "socket", "socket.core", "lfs", "posix",
                 "io.popen", "os.execute", "luaopen_io", "/etc/passwd", "../../etc/passwd",
                 "./init", "init.lua", "loadlib", "_G", "coroutine.running", "string\0io"}
-- A planted package table must not be consulted.
package = {preload = {}, loaded = {}, path = "/etc/?", cpath = "/lib/?.so"}
for _, name in ipairs(refused) do
  package.preload[name] = function() return "ESCAPED: preload consulted" end
  package.loaded[name] = "ESCAPED: package.loaded consulted"
end
for _, name in ipairs(refused) do
  local ok, m = pcall(require, name)
  if ok then
    print("ESCAPED: require('" .. name .. "') returned " .. tostring(m))
  elseif type(m) ~= "string" or not contains(m, "is not available in this sandbox") then
    print("unexpected error for " .. name .. ": " .. tostring(m))
    error("require gave an unclear error")
  end
end
-- What require does return gives no host access.
local io2, os2 = require("io"), require("os")
-- (io.open and os.remove answer nil, message, errno outside the sandbox's view; the others
-- raise.)
for _, f in ipairs({"open", "popen", "lines", "read"}) do
  local ok, r = pcall(io2[f], "/etc/passwd")
  if ok and r then print("ESCAPED: require('io')." .. f .. " worked") end
end
for _, f in ipairs({"execute", "remove", "rename"}) do
  local ok, r = pcall(os2[f], "/etc/hostname", "/tmp/h")
  if ok and r then print("ESCAPED: require('os')." .. f .. " worked") end
end
-- Replacing the globals does not redirect require.
_G.string = {rep = function() return "ESCAPED" end}
if require("string").rep == _G.string.rep then print("ESCAPED: require follows _G") end
