-- expect: ok
-- Attack: deep nesting fed to the parser through load: parentheses, tables, function bodies and
-- blocks, each past Lua's 200-level limit (THREATS 1, D9, D12). Each load must fail cleanly.
local function deep(open, middle, close, n)
  local a, b = "", ""
  for i = 1, n do a = a .. open; b = close .. b end
  return a .. middle .. b
end
local sources = {
  "return " .. deep("(", "1", ")", 300),
  "return " .. deep("{", "1", "}", 300),
  deep("do ", "", " end", 300),
  "return " .. deep("function() return ", "1", " end", 300),
  "return 1" .. deep(" .. (1", "", ")", 300),
}
for i, src in ipairs(sources) do
  local ok, f = pcall(load, src, "deep", "t")
  if ok and f then error("source " .. i .. " nested 300 deep was accepted") end
end
