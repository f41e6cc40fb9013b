-- tests/compat/upstream_bugs.lua: bugs of Lua 5.4.4 fixed upstream after it (lua/lua
-- v5.4.4..v5.4.8) that Debian's package still has and that give wrong answers or messages
-- without touching memory: moonbox gives what Debian's lua5.4 gives (docs/compat.md,
-- "Bugs of Lua 5.4.4"; SECURITY-MODEL "Upstream Lua bugs after 5.4.4"). Run by run_compat.sh
-- in both. If this starts to differ, liblua was updated or a guard changed an answer: update
-- compat.md. (997f11f5, the one moonbox corrects, is tests/escape/upstream_997f11f5_break_close.)

local function show(...)
  local t = table.pack(...)
  local parts = {}
  for i = 1, t.n do parts[i] = tostring(t[i]) end
  print(table.concat(parts, " | "))
end

-- 782ef85b: an index that is a comparison, on an upvalue table (5.4.8: 10).
do
  _ENV[true] = 10
  local function aux() return _ENV[1 < 2] end
  show("782ef85b", pcall(aux))
  _ENV[true] = nil
end

-- c764ca71: bitwise operations in a function with more than 256 constants (5.4.8: 3 3 3 4).
do
  local code = {"local x = {"}
  for i = 1, 257 do code[#code + 1] = i .. ".1," end
  code[#code + 1] = "};"
  code = table.concat(code)
  for _, ret in ipairs{"return (1 ~ (2 or 3))", "return (1 | (2 or 3))",
                       "return (1 + (2 or 3))", "return (1 << (2 or 3))",
                       "return (1 ~ (2 or 3)) + 0",
                       "local a, b = 5, 6; return (300 ~ (a < b and 7 or 8))"} do
    show("c764ca71", ret, pcall(assert(load(code .. ret))))
  end
end

-- d1ee2a4d: a field of the string "_ENV" is named as a global (5.4.8: field 'x').
show("d1ee2a4d", pcall(load("return ('_ENV').x + 1")))

-- 5ab6a575: a call whose "(" is on a later line (5.4.8: lines 2 and 5).
show("5ab6a575", pcall(load("a\n(\n23)\n")))
show("5ab6a575", pcall(load("local a = {x = 13}\na\n.\nx\n(\n23\n)\n")))

-- 02bab9fc (% and // by zero report a stale line) is not here: moonbox's count hook saves the
-- position at every instruction, so a metered run reports the right line and stock does not.

-- a1089b41: utf8.codes accepts spurious continuation bytes (5.4.8: an error for each).
for _, s in ipairs{"in\x80valid", "\xbfinvalid", "\u{3b1}\u{3bb}\xBF\u{3b1}"} do
  show("a1089b41", pcall(function()
    local n = 0
    for _ in utf8.codes(s) do n = n + 1 end
    return n
  end))
end
