-- expect: time_limit
-- limits: time=300ms instructions=0
-- Issue 9, F.7: closing the failed main chunk's variables runs guest code, under the run's
-- remaining budget: a handler that never returns ends in the time limit, not a hang.
local t <close> = setmetatable({}, {__close = function() while true do end end})
error("boom")
