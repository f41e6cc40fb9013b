-- expect: ok
-- accept: time_limit, instruction_limit
-- limits: instructions=0 time=500ms
-- Attack: table functions looping in C over huge ranges, with C functions as metamethods so not a
-- single VM instruction runs (THREATS 0.2, D4).
local cproxy = setmetatable({}, {__index = rawlen, __newindex = rawequal})
local huge = setmetatable({}, {__len = function() return math.maxinteger // 2 end,
                               __index = rawlen, __newindex = rawequal})
pcall(table.move, cproxy, 1, 1 << 50, 1, cproxy)
pcall(table.insert, huge, 1, "x")
pcall(table.remove, huge, 1)
pcall(table.concat, huge, "", 1, 1 << 50)
pcall(table.unpack, huge, 1, 1 << 30)
local arr = {}
for i = 1, 100000 do arr[i] = setmetatable({}, {__lt = rawequal}) end
pcall(table.sort, arr)
pcall(table.sort, arr, rawequal)
