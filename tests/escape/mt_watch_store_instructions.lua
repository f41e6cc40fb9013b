-- expect: instruction_limit
-- limits: memory=64M instructions=2e7 time=3s
-- Attack: mt_watch_store_loop under an instruction limit (deterministic mode's only stop):
-- 20,000 clones of one metatable, then an event removed and added again in a loop, each
-- addition visiting every clone inside one C call (the watch, issue 26). Charged one
-- instruction a visit, the 2e7 budget bought about 20 s of C work (a plain loop spends it
-- in well under a second), so the run ended on its 3 s time limit instead. A visit is charged
-- what it costs, so the budget ends the run first.
local mt, objs = {}, {}
for i = 1, 20000 do
  mt.__index = {i}
  objs[i] = setmetatable({}, mt)
end
local f = function() return true end
while true do
  mt.__eq = f
  mt.__eq = nil
end
