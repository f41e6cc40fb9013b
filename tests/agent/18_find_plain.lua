-- Agent task: "Locate literal markers (with magic characters) in the text."
-- expect-value: {"first":[1,10,10],"found":["8-12","14-22","24-27","34-36","44-45","none"],"from_end":[41,43],"last_dot":44,"starts":true,"upper":"50% OFF"}
local text = "price: $5.00 (approx.) [50% off] a+b=c; end.$"
local found = {}
for _, needle in ipairs({"$5.00", "(approx.)", "[50%", "a+b", ".$", "missing"}) do
  local s, e = text:find(needle, 1, true)
  found[#found + 1] = s and (s .. "-" .. e) or "none"
end
local last_dot = nil
local i = 0
while true do
  i = text:find(".", i + 1, true)
  if not i then break end
  last_dot = i
end
local from_end = {text:find("end", -8, true)}
local pattern_vs_plain = {text:find("."), text:find(".", 1, true)}
return {found = found, last_dot = last_dot, from_end = from_end, first = pattern_vs_plain,
  starts = text:sub(1, 5) == "price", upper = text:match("%[(.-)%]"):upper()}
