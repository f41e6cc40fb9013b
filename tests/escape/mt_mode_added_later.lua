-- expect: ok
-- Attack: a __mode added to the metatable after setmetatable (passed on by the watch, as
-- stock Lua makes the table weak, issue 26) must reach only the object: the clone the VM uses
-- as a metatable stays strong, so what it holds survives even when the guest's mt is made
-- weak too (THREATS 0.1, 983bc433). Also the same again in a metatable used by a pinned chain
-- target.
local index = {answer = 42}
local mt = {__index = index}
local t = setmetatable({}, mt)
local pinned = setmetatable({}, {__index = t})
mt.__mode = "k"
setmetatable(mt, {__mode = "v"})
index = nil
t[{}] = true
for i = 1, 200000 do local _ = {i} end
collectgarbage()
collectgarbage()
if next(t) ~= nil then print("ESCAPED: the __mode added later was ignored (stock: t is weak)") end
if t.answer ~= 42 or pinned.answer ~= 42 then
  print("ESCAPED: the clone lost its __index table (a weak metatable in the VM)")
end
