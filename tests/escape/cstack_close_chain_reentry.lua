-- expect: runtime_error
-- error-contains: C stack overflow
-- limits: memory=64M time=10s
-- Attack: a chain of coroutines closing each other, each __close handler first nesting C calls
-- that re-enter Lua (issue 9, A.1). Debian's 5.4.4 restarts the C-call count at every close
-- (lua_resetthread), so Lua's 200-level bound never fires: SIGSEGV after 25-30 closes on
-- an 8 MiB stack, before the 100-close nesting bound. Every re-entry rotates through a load
-- reader, a gsub callback, a sort comparator, table.concat through __index, string.format
-- and tostring through __tostring, pcall and xpcall.
local nesters = {
  function(f) -- load reader
    local done, r = false, nil
    local chunk, err = load(function()
      if done then return nil end
      done = true
      r = f()
      return "return 1"
    end)
    if not chunk then error(err, 0) end
    return r
  end,
  function(f) -- gsub callback
    local r
    string.gsub("x", "x", function() r = f() return "" end)
    return r
  end,
  function(f) -- sort comparator
    local r
    table.sort({2, 1}, function(a, b) r = r or f() return a < b end)
    return r
  end,
  function(f) -- table.concat reading through __index
    local r
    local t = setmetatable({}, {__index = function() r = f() return "" end})
    table.concat(t, "", 1, 1)
    return r
  end,
  function(f) -- string.format and tostring through __tostring
    local r
    local t = setmetatable({}, {__tostring = function() r = f() return "" end})
    string.format("%s", t)
    return r
  end,
  function(f) -- tostring through __tostring
    local r
    tostring(setmetatable({}, {__tostring = function() r = f() return "" end}))
    return r
  end,
  function(f) -- pcall
    local ok, r = pcall(f)
    if not ok then error(r, 0) end
    return r
  end,
  function(f) -- xpcall
    local ok, r = xpcall(f, function(m) return m end)
    if not ok then error(r, 0) end
    return r
  end,
}
local function nest(k, f)
  if k == 0 then return f() end
  return nesters[k % #nesters + 1](function() return nest(k - 1, f) end)
end
local prev
for i = 1, 100 do
  local p = prev
  local co = coroutine.create(function()
    local guard <close> = setmetatable({}, {__close = function()
      if p then
        nest(120, function()
          local ok, err = coroutine.close(p)
          if not ok then error(err, 0) end
        end)
      end
    end})
    coroutine.yield()
  end)
  assert(coroutine.resume(co))
  prev = co
end
local ok, err = coroutine.close(prev)
if not ok then error(err, 0) end
print("ESCAPED: closed a chain of 100 coroutines nesting 120 C re-entries each")
