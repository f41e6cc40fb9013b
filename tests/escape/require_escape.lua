-- expect: ok
-- Attack: use require to load host modules, C libraries or files (THREATS E1-E3):
-- ffi, socket, io/os by other names, host paths, C symbols; point package.path and cpath at
-- host folders; plant C searchers; replace the globals require might read.
local function contains(s, sub)
  return string.find(s, sub, 1, true) ~= nil
end
local refused = {"ffi", "jit", "socket", "socket.core", "lfs", "posix",
                 "io.popen", "os.execute", "luaopen_io", "/etc/passwd", "../../etc/passwd",
                 "./init", "init.lua", "loadlib", "coroutine.running", "string\0io"}
-- Host folders on the path: they are paths of the sandbox's view, where nothing is.
package.path = "/usr/share/lua/5.4/?.lua;/etc/?;../../../../etc/?;" .. package.path
package.cpath = "/usr/lib/x86_64-linux-gnu/lua/5.4/?.so;/lib/?.so"
for _, name in ipairs(refused) do
  local ok, m = pcall(require, name)
  if ok then
    print("ESCAPED: require('" .. name .. "') returned " .. tostring(m))
  elseif type(m) ~= "string" or not contains(m, "not found:") then
    print("unexpected error for " .. name .. ": " .. tostring(m))
    error("require gave an unclear error")
  end
end
-- Files the host has at those paths are not found.
for _, f in ipairs({"/etc/passwd", "/etc/hostname", "/usr/share/lua/5.4/inspect.lua"}) do
  if loadfile(f) or pcall(dofile, f) then print("ESCAPED: loadfile read host file " .. f) end
  if package.searchpath(f, "?") then print("ESCAPED: searchpath found host file " .. f) end
end
-- No C searcher, and loadlib only refuses.
if #package.searchers ~= 4 then print("ESCAPED: a C searcher is installed") end
if pcall(package.loadlib, "/lib/x86_64-linux-gnu/libc.so.6", "*") then
  print("ESCAPED: package.loadlib worked")
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
