-- expect: ok
-- host-functions: on
-- Attack: arguments nested past the codec's depth, cyclic tables, functions, coroutines and
-- userdata as arguments: the encoder must refuse each with a message, never recurse unbounded.
local deep = {}
local t = deep
for i = 1, 100000 do t[1] = {} t = t[1] end
local ok, e = pcall(host.echo, deep)
assert(not ok and e:find("host.echo(#1)", 1, true), tostring(e))
local cyc = {} cyc.self = cyc
ok, e = pcall(host.echo, cyc)
assert(not ok, "a cycle crossed")
for _, v in ipairs{print, coroutine.create(print), io.stdout} do
  ok, e = pcall(host.echo, 1, v)
  assert(not ok and e:find("host.echo(#2)", 1, true), tostring(e))
end
ok, e = pcall(host.echo, 0/0)
assert(not ok, "NaN crossed")
local mt = setmetatable({}, {__index = function() return "ESCAPED" end, __pairs = function() error("ESCAPED") end})
assert(#host.echo(mt) == 1)
return "done"
