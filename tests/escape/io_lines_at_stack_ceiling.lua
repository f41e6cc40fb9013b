-- expect: ok
-- limits: memory=128M time=60s
-- Attack: call io.lines and f:lines with 250 formats from a frame at the Lua stack's ceiling.
-- A C function is promised only LUA_MINSTACK free slots; lines pushes its 250 formats again
-- for the iterator's upvalues, which (before the luaL_checkstack in push_lines) wrote past the
-- end of the stack: a SIGSEGV. Now each call either works or fails with a Lua error.
local f = assert(io.open("/tmp/x.txt", "w"))
f:write("a\nb\n")
f:close()
local fmts = {}
for i = 1, 250 do fmts[i] = "l" end
local t = {}
for i = 1, 1000000 do t[i] = true end
local errors, by_lines = {}, 0
-- One call of lines with n values below it on the stack; each handle is closed at once
-- (<close>): the open_files quota is 64.
local function call(how, n)
  local made = false
  local ok, err = pcall(function(...)
    if how == "io.lines" then
      local it, _, _, h <close> = io.lines("/tmp/x.txt", table.unpack(fmts))
      made = true
      return it()
    end
    local h <close> = assert(io.open("/tmp/x.txt"))
    local it = h:lines(table.unpack(fmts))
    made = true
    return it()
  end, table.unpack(t, 1, n))
  if not ok then
    err = tostring(err)
    assert(err:find("stack overflow") or err:find("too many arguments")
           or err:find("too many results to unpack"), err)
    errors[#errors + 1] = err
    -- lines itself refused (luaL_checkstack's "stack overflow (too many arguments)"), rather
    -- than the call before it or the iterator after it.
    if not made and err:find("too many arguments") then by_lines = by_lines + 1 end
  end
  return ok
end
for _, how in ipairs({"io.lines", "f:lines"}) do
  -- The deepest stack the call still works from: every step of the search runs lines at
  -- or past the ceiling, where the old code wrote past the stack's end.
  local lo, hi = 1, #t
  assert(call(how, lo), how .. " failed on a shallow stack")
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if call(how, mid) then lo = mid else hi = mid - 1 end
  end
  assert(lo > 1000 and lo < #t, how .. ": no ceiling found: " .. lo)
  -- Around the ceiling, one slot at a time.
  for n = lo - 8, lo + 300, 4 do call(how, n) end
end
-- lines itself refused at the ceiling (it used to write past the stack's end there).
assert(by_lines > 0, "lines never refused at the ceiling: " .. #errors .. " other errors")
print("refused at the ceiling", #errors, "by lines", by_lines)
