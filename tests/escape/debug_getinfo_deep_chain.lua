-- expect: ok
-- Attack: a field chain tens of thousands of links long in one expression: every error
-- message, traceback and debug.getinfo "n" names the value by recursing once per link in C
-- (ldebug.c getobjname, upstream 7923dbbf, unpatched in 5.4.4): a C stack overflow (SIGSEGV)
-- and seconds of unmetered work. vm/load.c refuses such chunks when they are compiled.
local parts = {"local a = {} a.x = a\nlocal function f() return debug.getinfo(2, 'n') end\nreturn a"}
for i = 1, 100000 do parts[#parts + 1] = ".x" end
parts[#parts + 1] = ".y.z, f()"
local src = table.concat(parts)
local fn, err = load(src)
if fn then
  local ok, e = pcall(fn)
  print("ESCAPED: a 100000-link chain was compiled and ran: " .. tostring(ok))
end
assert(type(err) == "string" and err:find("expression too complex", 1, true), err)
-- The same at a length real code writes works, names included.
local short = "local a = {} a.x = a\nreturn a" .. string.rep(".x", 30) .. ".y.z"
local ok, e = pcall(load(short))
assert(not ok and e:find("field 'y'", 1, true), e)
local g = load("local t = {a = {b = {c = {}}}} function t.a.b.c.f() return debug.getinfo(1, 'n') end local r = t.a.b.c.f() return r")
local info = g()
assert(info.name == "f" and (info.namewhat == "method" or info.namewhat == "field"), info.namewhat)
