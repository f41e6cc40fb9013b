-- expect: runtime_error
-- Attack: a top-level yield through pcall (yieldable in 5.4) to reach the host's resume (THREATS D13).
local ok, e = pcall(coroutine.yield, "out")
if ok then print("ESCAPED: the yield came back as a success") end
error("yield refused: " .. tostring(e), 0)
