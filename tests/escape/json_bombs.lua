-- expect: memory_limit
-- limits: memory=4M
-- Attack: JSON bombs through the guest json library (THREATS D5, P0 item 6): nesting past the
-- limit (must be a clean error, not a C stack overflow), then a document whose decoded form
-- is many times its text, kept alive until the memory limit must stop the run.
local deep = ""
for i = 1, 5000 do deep = deep .. "[" end
local ok, e = pcall(json.decode, deep)
assert(not ok and e:find("nesting deeper than 128", 1, true), "deep nesting: " .. tostring(e))
local deep_obj = ""
for i = 1, 5000 do deep_obj = deep_obj .. '{"a":' end
ok, e = pcall(json.decode, deep_obj)
assert(not ok and e:find("nesting deeper than", 1, true), "deep objects: " .. tostring(e))
local t = {}
for i = 1, 300 do t = {t} end
ok, e = pcall(json.encode, t)
assert(not ok, "encoding 300 levels must fail")
-- Each "[]," (3 bytes) decodes to a table of ~56 bytes: a small text, a huge heap.
local unit = "[],"
for i = 1, 15 do unit = unit .. unit end -- 98 KiB of text
local text = "[" .. unit .. "[]]"
local keep = {}
for i = 1, 1000 do
  keep[i] = json.decode(text)
end
print("ESCAPED: decoded " .. #keep .. " copies past a 4 MiB limit")
