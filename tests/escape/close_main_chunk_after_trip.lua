-- expect: instruction_limit
-- limits: instructions=1e5
-- stdout-not-contains: ESCAPED
-- Issue 9, F.7: after a limit, the failed chunk's to-be-closed variables are not closed: no
-- guest code runs once a limit is hit (THREATS D6).
local t <close> = setmetatable({}, {__close = function() print("ESCAPED: closed after a trip") end})
while true do end
