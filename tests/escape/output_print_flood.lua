-- expect: output_limit
-- limits: output=64k
-- Attack: print in an endless loop floods the captured output (THREATS D11).
local line = "flood flood flood flood flood flood flood flood flood flood flood flood"
while true do print(line) end
