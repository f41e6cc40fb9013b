-- expect: ok
-- Attack: the stdlib C functions that loop without the hook (patterns, rep, pack, the table
-- library, utf8 scans) must raise a clear "not available" error instead of running
-- (THREATS 0.2, D1-D4, 8.6).
local function contains(s, sub)
  for i = 1, #s - #sub + 1 do
    if s:sub(i, i + #sub - 1) == sub then return true end
  end
  return false
end
local s = "aaaa"
local cases = {
  {"string.find", string.find, s, "a"}, {"string.match", string.match, s, "a"},
  {"string.gmatch", string.gmatch, s, "a"}, {"string.gsub", string.gsub, s, "a", "b"},
  {"string.rep", string.rep, s, 2}, {"string.pack", string.pack, "i4", 1},
  {"string.unpack", string.unpack, "i4", "\0\0\0\0"},
  {"table.move", table.move, {1}, 1, 1, 2}, {"table.concat", table.concat, {"a"}},
  {"table.insert", table.insert, {}, 1}, {"table.remove", table.remove, {1}},
  {"table.unpack", table.unpack, {1}}, {"table.sort", table.sort, {2, 1}},
  {"utf8.len", utf8.len, s}, {"utf8.offset", utf8.offset, s, 1},
  {"utf8.codepoint", utf8.codepoint, s, 1},
}
local wrong = {}
for _, c in ipairs(cases) do
  local name, f = c[1], c[2]
  if type(f) ~= "function" then
    wrong[#wrong + 1] = name .. " is missing (expected a function raising 'not available')"
  else
    local ok, e = pcall(f, c[3], c[4], c[5], c[6])
    if ok then
      wrong[#wrong + 1] = name .. " ran"
    elseif type(e) ~= "string" or not contains(e, "not available") then
      wrong[#wrong + 1] = name .. " raised an unclear error: " .. tostring(e)
    end
  end
end
-- The same functions reached as string methods.
for _, m in ipairs({"find", "match", "gmatch", "gsub", "rep"}) do
  local ok, e = pcall(function() return s[m](s, "a", "b") end)
  if ok then wrong[#wrong + 1] = "(\"\"):" .. m .. " ran" end
end
if #wrong > 0 then
  local msg = ""
  for i, w in ipairs(wrong) do msg = msg .. (i > 1 and "; " or "") .. w end
  error(msg, 0)
end
