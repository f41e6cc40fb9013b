-- expect: ok
-- accept: time_limit, instruction_limit
-- limits: instructions=0 time=500ms
-- Attack: string.rep("", 2^63-1) passes the size check and loops in C forever, also in 5.4.8
-- (THREATS 0.2, D3); and a huge non-empty rep must fail on memory, not hang.
local ok, r = pcall(string.rep, "", math.maxinteger)
if ok and r ~= "" then error("string.rep of an empty string returned something else") end
pcall(string.rep, "", math.maxinteger, "")
pcall(function() return (""):rep(math.maxinteger) end)
pcall(string.rep, "x", 1 << 40)
