-- expect: ok
-- Attack: __mode added to the metatable after setmetatable must not make the table weak
-- (THREATS 0.1, 983bc433, 8.4).
local mt = {}
local t = setmetatable({}, mt)
mt.__mode = "kv"
t[{}] = {}
t[1] = {}
pcall(collectgarbage, "collect")
for i = 1, 200000 do local _ = {i} end
pcall(collectgarbage, "collect")
if t[1] == nil or next(t, nil) == nil then print("ESCAPED: the table became weak") end
local keys = 0
for k in pairs(t) do keys = keys + 1 end
if keys ~= 2 then print("ESCAPED: weak entries were collected (" .. keys .. " left)") end
