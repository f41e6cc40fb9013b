-- expect: output_limit
-- limits: output=64k
-- Attack: io.stderr:write in an endless loop floods the captured stderr (THREATS D11).
assert(io and io.stderr, "io.stderr is not available")
local err = io.stderr
local chunk = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
while true do err:write(chunk) end
