-- Agent task: "Word-wrap the paragraph to 28 columns and indent continuation lines."
-- expect-stdout:  1 Moonbox runs untrusted Lua\n 2   in process, with limits on\n 3   memory, instructions and\n 4   time, so an agent can\n 5   compute things safely and\n 6   quickly.\n
-- expect-value: {"bytes":[76,117,97],"initials":"MruLipwlomiatsaacctsaq","lines":6,"longest":28,"reversed":"desserts","sub":["def","bcde",""]}
local text = "Moonbox runs untrusted Lua in process, with limits on memory, instructions and time, so an agent can compute things safely and quickly."
local width, lines, line = 28, {}, ""
for word in text:gmatch("%S+") do
  if #line == 0 then
    line = word
  elseif #line + 1 + #word <= width then
    line = line .. " " .. word
  else
    lines[#lines + 1] = line
    line = "  " .. word
  end
end
if #line > 0 then lines[#lines + 1] = line end
for i, l in ipairs(lines) do print(string.format("%2d %s", i, l)) end
local longest = 0
for _, l in ipairs(lines) do longest = math.max(longest, #l) end
local initials = text:gsub("(%a)%a*", "%1"):gsub("[^%a]", "")
return {lines = #lines, longest = longest, initials = initials, reversed = ("stressed"):reverse(),
  bytes = {("Lua"):byte(1, -1)}, sub = {("abcdef"):sub(-3), ("abcdef"):sub(2, -2), ("abc"):sub(5)}}
