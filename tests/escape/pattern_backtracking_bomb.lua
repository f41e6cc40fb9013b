-- expect: ok
-- accept: time_limit, instruction_limit
-- limits: instructions=0 time=500ms
-- Attack: exponential backtracking (a?^n a^n) and O(n^k) `.-` patterns run in C with no hook;
-- they must be refused or metered, never hang (THREATS 0.2, D1, D2). string.rep is unavailable,
-- so the inputs are built by concatenation.
local n = 40
local subject, opt, req = "", "", ""
for i = 1, n do subject = subject .. "a"; opt = opt .. "a?"; req = req .. "a" end
local expo = opt .. req
local slow = ".-.-.-.-.-.-.-.-.-.-b"
local long = "a"
for i = 1, 16 do long = long .. long end -- 64 KiB
local needle = long:sub(1, 30000) .. "b"
pcall(string.find, subject, expo)
pcall(function() return subject:match(expo) end)
pcall(function() return long:find(slow) end)
pcall(function() return long:find(needle, 1, true) end)
pcall(function() for _ in long:gmatch(slow) do end end)
pcall(function() return long:gsub(".-.-.-b", "x") end)
pcall(function() return long:gsub("a", function() return "b" end) end)
