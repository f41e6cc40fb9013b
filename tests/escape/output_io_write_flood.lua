-- expect: output_limit
-- limits: output=64k
-- Attack: io.write in an endless loop floods the captured stdout (THREATS D11).
assert(io and io.write, "io.write is not available")
local chunk = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
while true do io.write(chunk) end
