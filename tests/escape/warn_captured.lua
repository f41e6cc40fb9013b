-- expect: ok
-- Attack: warn("@on") makes stock Lua write warnings to the process's stderr (THREATS 0.6,
-- D11); moonbox's warn writes to the run's captured stderr only (the driver checks that
-- nothing reaches the host's own fds), counted against the output limit.
local w = warn or _G.warn or load("return warn")()
assert(type(w) == "function")
w("@on")
w("a warning")
for i = 1, 100 do w("@on") w("piece ", tostring(i)) end
w("@off")
w("silent")
