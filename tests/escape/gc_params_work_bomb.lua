-- expect: time_limit
-- limits: time=1s
-- Attack: tune the collector so that every allocation runs a whole O(heap) cycle inside one
-- instruction (pause 0, a huge step multiplier and step size) over a big live heap, where the
-- hook cannot see it: the clamps keep each step small, so the deadline is met.
collectgarbage("setpause", 0)
collectgarbage("setstepmul", 1e9)
collectgarbage("incremental", 0, 1e9, 62)
local live = {}
for i = 1, 300000 do live[i] = {i} end
while true do local t = {} end
