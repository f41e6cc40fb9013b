-- tests/compat/tables.lua: table.*, string.rep/pack/unpack and utf8.* cases whose output must match stock lua5.4 byte for byte.
-- Run by run_compat.sh in moonbox and in lua5.4. No string.find/match/gsub/gmatch, no output
-- that depends on pairs order, no addresses. Argument errors are raised from a named local
-- call (`f(...)` inside `call`), so both interpreters name the function the same way.

local count = 0

-- Render any list of results on one line, with types where print would hide them.
local function render(r)
  local out = "(" .. r.n .. ")"
  for i = 1, r.n do
    local v = r[i]
    local t = type(v)
    if t == "string" then out = out .. " s:" .. string.format("%q", v)
    elseif t == "number" then out = out .. " " .. math.type(v):sub(1, 1) .. ":" .. tostring(v)
    elseif t == "table" then out = out .. " table"
    else out = out .. " " .. tostring(v) end
  end
  return out
end

local function call(f, ...)
  local r = table.pack(f(...))
  return r
end

-- One case: the results of f(...) or its error message.
local function case(label, f, ...)
  count = count + 1
  local ok, r = pcall(call, f, ...)
  if ok then
    print(count, label, render(r))
  else
    print(count, label, "error:", tostring(r))
  end
end

-- The array part of t as text, elements rendered with their types.
local function show(t, n)
  local parts = {}
  for i = 1, n or #t do
    local v = rawget(t, i)
    parts[#parts + 1] = type(v) == "string" and ("'" .. v .. "'") or tostring(v)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function hex(s)
  local parts = {}
  for i = 1, #s do parts[i] = string.format("%02x", s:byte(i)) end
  return table.concat(parts)
end

-- A deterministic generator: both interpreters see the same data.
local seed = 12345
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

-- ---- string.rep ----------------------------------------------------------------------------
for _, s in ipairs({"", "a", "ab", "x\0y"}) do
  for _, n in ipairs({-1, 0, 1, 2, 3, 7}) do
    case("rep " .. hex(s) .. " " .. n, string.rep, s, n)
    for _, sep in ipairs({"", ",", "--"}) do
      case("rep " .. hex(s) .. " " .. n .. " sep " .. sep, string.rep, s, n, sep)
    end
  end
end
case("rep number", string.rep, 12, 3, 0)
case("rep float count", string.rep, "x", 2.0)
case("rep length", function() return #string.rep("abc", 1000, "--") end)
case("rep method", function() return ("ab"):rep(3) end)
case("rep no args", string.rep)
case("rep bad count", string.rep, "x", 1.5)
case("rep bad sep", string.rep, "x", 2, {})
case("rep too large", string.rep, "x", 2^31)
case("rep too large sep", string.rep, "x", 2^30, "yy")
-- (string.rep("", 2^62) is left out: stock loops for ever there, THREATS D3.)

-- ---- string.pack / string.unpack -----------------------------------------------------------
local packs = {
  {"<i4", 7}, {">i4", -2}, {"<i2h", 1, -2}, {"<b B", -1, 255}, {"<H", 65535}, {"<j", -5},
  {"<J", 5}, {"<T", 9}, {"<i3", 70000}, {"<I5", 2^33}, {"<i16", -1}, {"<l L", -3, 3},
  {"<f", 0.5}, {"<d", 1.25}, {"<n", -2.5}, {"z", "ab"}, {"<s1", "xyz"}, {"<s2", ""},
  {"c5", "ab"}, {"c0", ""}, {"<!4 b i4", 1, 2}, {"<!8 b d", 1, 2}, {"<! b j", 1, 2},
  {"<!2 b Xi4 b", 1, 2}, {"<Xi4 b", 1}, {"x b x", 3}, {"= i4", 1}, {"<i4 >i4", 1, 1},
  {"<!4 h i4 Xi8", 1, 2},
  -- errors
  {"y", 1}, {"i17", 1}, {"i0", 1}, {"c", "a"}, {"c2", "abc"}, {"Xz", 1}, {"Xc1", 1},
  {"!3i4", 1}, {"i4", 2^31}, {"i1", 200}, {"B", -1}, {"i4"}, {"i4", "x"}, {"z", "a\0b"},
  {"s1", ("x"):rep(300)}, {"i4 9", 1}, {"<d", "1.5"}, {"<i4", "12"},
  -- short plain formats (packed and unpacked by moonbox itself, not by stock)
  {">i1 I2 j", -1, 65535, 1}, {"<I4", 2^32 - 1}, {"<I8", -1}, {">i8", math.mininteger},
  {"<i7", -(2^55)}, {"<I3", 2^24 - 1}, {">h H", -32768, 65535}, {">f", 1/3}, {"<d", -0.0},
  {"=d", 3}, {"=n", 1e308}, {"<j", 2^53}, {"i04", 3}, {"  <i2  ", 5}, {""}, {"x"}, {"xx b", 1},
  {"<i4\0y", 1}, {"<i4\0z", 1}, {"<f", 1e300}, {">d", 0/0 ~= 0/0 and 1 or 0},
  {"<I4", -1}, {"<I4", 2^32}, {"<b", 128}, {"<b", -129}, {"<B", 256}, {"<i2", 2^15},
  {"<i4", 1.5}, {"<i4", "0x10"}, {"<i4", "z"}, {"<f", {}}, {">d"}, {"i4 i4", 1}, {"i4 i4"},
  {"<i4 i4 i4", 1, nil, 3}, {"<i9", -1}, {"<i3 x x", 70000}, {"!", 1}, {"<ix", 1},
}
for _, p in ipairs(packs) do
  local fmt = p[1]
  count = count + 1
  local ok, r = pcall(call, string.pack, fmt, table.unpack(p, 2))
  if ok then
    local packed = r[1]
    print(count, "pack " .. fmt, hex(packed), string.packsize and pcall(string.packsize, fmt))
    case("unpack " .. fmt, string.unpack, fmt, packed)
  else
    print(count, "pack " .. fmt, "error:", r)
  end
end
case("unpack pos", string.unpack, "c2", "abcd", 3)
case("unpack neg pos", string.unpack, "<i4", "xx\1\0\0\0", -4)
case("unpack far neg pos", string.unpack, "<i2", "\1\0", -10)
case("unpack pos past end", string.unpack, "i4", "abcd", 6)
case("unpack pos at end", string.unpack, "", "abcd", 5)
case("unpack short", string.unpack, "i4", "abc")
case("unpack unfinished z", string.unpack, "z", "abc")
case("unpack many", string.unpack, "bbbbbbbb", "\1\2\3\4\5\6\7\8")
case("unpack s1 short", string.unpack, "s1", "\9ab")
case("unpack i16 overflow", string.unpack, "<i16", "\0\0\0\0\0\0\0\0\1\0\0\0\0\0\0\0")
case("unpack i9 sign", string.unpack, "<i9", ("\255"):rep(9))
case("unpack float", string.unpack, "<f", string.pack("<f", 3.0))
case("unpack big c", function() return #string.unpack("c100000", ("x"):rep(100000)) end)
case("unpack plain mixed", string.unpack, "<i2 I2 b B", "\255\255\255\255\128\128")
case("unpack plain neg pos", string.unpack, "<i2", "abcd", -2)
case("unpack plain pos 0", string.unpack, "<i2", "abcd", 0)
case("unpack plain pos float", string.unpack, "<i2", "abcd", 1.5)
case("unpack plain pos string", string.unpack, "<i2", "abcd", "2")
case("unpack plain pos table", string.unpack, "<i2", "abcd", {})
case("unpack plain at end", string.unpack, "<i2", "abcd", 4)
case("unpack plain past end", string.unpack, "<i2", "abcd", 6)
case("unpack plain pad short", string.unpack, "<i2 x", "ab")
case("unpack plain mininteger pos", string.unpack, "b", "x", math.mininteger)
case("unpack plain maxinteger pos", string.unpack, "b", "x", math.maxinteger)
case("unpack plain >f", string.unpack, ">f", string.pack(">f", -1.5))
case("unpack plain >d =n", string.unpack, ">d =n", string.pack(">d =n", 0.1, -7))
case("unpack plain no data", string.unpack, "<i2")
case("unpack plain data table", string.unpack, "<i2", {})
case("unpack plain data number", string.unpack, "<i2", 12)
case("unpack plain j J", string.unpack, "<j J", ("\255"):rep(16))
case("unpack plain i7 I7", string.unpack, ">i7 I7", ("\128"):rep(14))
case("unpack plain empty format", string.unpack, "", "abc", 2)
case("unpack plain only pads", string.unpack, "xx", "abc")
case("unpack plain NUL in format", string.unpack, "<i2\0y", "\1\0")
case("pack big c", function() return #string.pack("c100000", "") end)
case("pack many args", function() return #string.pack(("i4"):rep(100), table.unpack((function()
  local t = {} for i = 1, 100 do t[i] = i end return t end)())) end)

-- ---- table.insert / table.remove -----------------------------------------------------------
do
  local t = {}
  for i = 1, 10 do table.insert(t, i * 10) end
  print("insert append", show(t))
  table.insert(t, 1, 0) print("insert front", show(t))
  table.insert(t, 6, 55) print("insert middle", show(t))
  table.insert(t, #t + 1, 999) print("insert end", show(t))
  print("remove last", table.remove(t), show(t))
  print("remove first", table.remove(t, 1), show(t))
  print("remove middle", table.remove(t, 5), show(t))
  print("remove past end", table.remove(t, #t + 1), show(t))
  while #t > 0 do table.remove(t, 1) end
  print("emptied", show(t), table.remove(t), table.remove(t, 0), select("#", table.remove(t)))
end
case("insert no value", table.insert, {})
case("insert too many", table.insert, {}, 1, 2, 3)
case("insert pos 0", table.insert, {1}, 0, 2)
case("insert pos past", table.insert, {1}, 3, 2)
case("insert pos float", table.insert, {1}, 1.5, 2)
case("insert nil table", table.insert, nil, 1)
case("insert string", table.insert, "abc", 1)
case("insert nil value", function() local t = {1, 2} table.insert(t, 1, nil) return #t, t[1], t[2], t[3] end)
case("remove pos past", table.remove, {1, 2}, 5)
case("remove pos 0 nonempty", table.remove, {1, 2}, 0)
case("remove pos -1", table.remove, {1, 2}, -1)
case("remove from empty at 1", function() local t = {} return table.remove(t, 1), #t end)
case("remove bad pos", table.remove, {1}, "x")
case("insert bad len", table.insert, setmetatable({}, {__len = function() return 1.5 end}), 1)
case("insert len string", function()
  local t = setmetatable({}, {__len = function() return "2" end})
  table.insert(t, "v") return rawget(t, 3)
end)
do
  local store = {10, 20, 30}
  local log = {}
  local p = setmetatable({}, {
    __len = function() return #store end,
    __index = function(_, k) log[#log + 1] = "r" .. k return store[k] end,
    __newindex = function(_, k, v) log[#log + 1] = "w" .. k store[k] = v end,
  })
  table.insert(p, 1, 5)
  table.insert(p, 40)
  local r = table.remove(p, 2)
  print("proxy insert/remove", r, show(store), table.concat(log, " "))
end

-- ---- table.move ----------------------------------------------------------------------------
local function base() return {1, 2, 3, 4, 5, 6, 7, 8} end
local moves = {
  {1, 3, 2}, {2, 4, 1}, {1, 8, 3}, {3, 8, 1}, {1, 0, 5}, {5, 5, 5}, {1, 3, 10}, {6, 8, 7},
  {-2, 1, 1}, {0, 2, 4}, {8, 8, 1}, {2, 7, 3}, {4, 6, 2}, {1, 1, -1},
}
for _, m in ipairs(moves) do
  local t = base()
  local r = table.move(t, m[1], m[2], m[3])
  print("move", m[1], m[2], m[3], r == t, show(t, 12))
  local dest = {"a", "b", "c"}
  local r2 = table.move(base(), m[1], m[2], m[3], dest)
  print("move to other", m[1], m[2], m[3], r2 == dest, show(dest, 12))
end
case("move too many", table.move, {}, -1, math.maxinteger, 1)
case("move too many 2", table.move, {}, math.mininteger, -1, 1)
case("move wrap", table.move, {}, 1, 10, math.maxinteger)
case("move wrap edge", function() return table.move({}, 1, 2, math.maxinteger - 1) ~= nil end)
case("move not table", table.move, 1, 1, 1, 1)
case("move dest not table", table.move, {}, 1, 1, 1, 2)
case("move missing args", table.move, {}, 1)
case("move empty range big", function() return #table.move({}, math.maxinteger, 1, 1) end)
do
  local store = {1, 2, 3, 4}
  local log = {}
  local p = setmetatable({}, {
    __index = function(_, k) log[#log + 1] = "r" .. k return store[k] end,
    __newindex = function(_, k, v) log[#log + 1] = "w" .. k store[k] = v end,
  })
  table.move(p, 1, 3, 2)
  print("proxy move overlap", show(store), table.concat(log, " "))
  log = {}
  table.move(p, 2, 4, 1)
  print("proxy move down", show(store), table.concat(log, " "))
end

-- ---- table.concat --------------------------------------------------------------------------
case("concat plain", table.concat, {1, 2.5, "x", -0.0, 2^63, 10 // 3})
case("concat sep", table.concat, {"a", "b", "c"}, ", ")
case("concat range", table.concat, {"a", "b", "c", "d"}, "-", 2, 3)
case("concat empty", table.concat, {}, "x")
case("concat empty range", table.concat, {"a"}, "x", 3, 2)
case("concat single", table.concat, {"a"}, "x", 1, 1)
case("concat number sep", table.concat, {1, 2}, 3)
case("concat float sep", table.concat, {1, 2}, 0.5)
case("concat nul", table.concat, {"a\0", "\0b"}, "\0")
case("concat made by __index", function()
  local t = setmetatable({}, {__index = function(_, k)
    if k % 3 == 0 then return k * 1.5 end
    return string.rep(string.char(64 + k % 26), 70 + k)
  end})
  local r = table.concat(t, string.rep("-", 90), 1, 40)
  return #r, r:sub(1, 100), r:sub(-100)
end)
case("concat long sep numbers", table.concat, {1, 2^63, -0.0, math.mininteger}, ("=/"):rep(50))
case("concat bad value", table.concat, {1, {}, 3})
case("concat bool", table.concat, {1, true})
case("concat hole", table.concat, {1, 2}, ",", 1, 3)
case("concat bad sep", table.concat, {}, {})
case("concat bad i", table.concat, {}, "", "x")
case("concat not table", table.concat, 5)
case("concat string arg", table.concat, "abc")
case("concat maxint", table.concat,
  setmetatable({}, {__index = function(_, k) return k % 10 end}), ",", math.maxinteger - 2,
  math.maxinteger)
case("concat minint", table.concat,
  setmetatable({}, {__index = function(_, k) return "v" end}), "", math.mininteger,
  math.mininteger + 2)
case("concat big", function()
  local t = {} for i = 1, 5000 do t[i] = i end
  local s = table.concat(t, ";")
  return #s, s:sub(1, 20), s:sub(-20)
end)
case("concat len meta", table.concat,
  setmetatable({"a", "b", "c"}, {__len = function() return 2 end}), "+")

-- ---- table.unpack --------------------------------------------------------------------------
case("unpack all", table.unpack, {1, 2, 3})
case("unpack from", table.unpack, {1, 2, 3}, 2)
case("unpack range", table.unpack, {1, 2, 3}, 2, 5)
case("unpack neg", table.unpack, {1, 2, 3}, -1, 1)
case("unpack empty", table.unpack, {})
case("unpack reversed", table.unpack, {1, 2}, 3, 1)
case("unpack one", table.unpack, {1, 2}, 2, 2)
case("unpack holes", table.unpack, {1, nil, 3})
case("unpack n", function() local t = table.pack(1, nil, nil) return table.unpack(t, 1, t.n) end)
case("unpack too many", table.unpack, {}, 1, 1e7)
case("unpack huge", table.unpack, {}, math.mininteger, math.maxinteger)
case("unpack float", table.unpack, {}, 1, 1.5)
case("unpack nil", table.unpack)
case("unpack string", table.unpack, "abc", 1, 2)
case("unpack count", function() return select("#", table.unpack({}, 1, 10000)) end)
case("unpack meta", table.unpack, setmetatable({}, {__index = function(_, k) return k * 2 end,
  __len = function() return 4 end}))

-- ---- table.sort ----------------------------------------------------------------------------
local function data(n, range)
  local t = {}
  for i = 1, n do t[i] = rand(range) end
  return t
end
for _, n in ipairs({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 17, 31, 32, 33, 50, 100}) do
  for _, range in ipairs({3, 1000}) do
    local t = data(n, range)
    table.sort(t)
    print("sort", n, range, show(t))
    local u = data(n, range)
    table.sort(u, function(a, b) return a > b end)
    print("sort desc", n, range, show(u))
  end
end
do
  local t = data(2000, 100000)
  table.sort(t)
  local ok = true
  for i = 2, #t do ok = ok and t[i - 1] <= t[i] end
  print("sort 2000", ok, t[1], t[1000], t[2000])
  local sorted = {} for i = 1, 500 do sorted[i] = i end
  table.sort(sorted) print("sort sorted", sorted[1], sorted[250], sorted[500])
  local rev = {} for i = 1, 500 do rev[i] = 501 - i end
  table.sort(rev) print("sort reversed", rev[1], rev[250], rev[500])
  local same = {} for i = 1, 500 do same[i] = 7 end
  table.sort(same) print("sort equal", same[1], same[500])
  local organ = {} for i = 1, 500 do organ[i] = i <= 250 and i or 501 - i end
  table.sort(organ) print("sort organ pipe", show(organ, 10))
end
case("sort strings", function()
  local t = {"banana", "apple", "Cherry", "apple2", "", "b"}
  table.sort(t) return table.concat(t, ",")
end)
case("sort mixed numbers", function()
  local t = {3, 1.5, -2, 2^53, math.mininteger, 0.0, -0.5, 1}
  table.sort(t)
  local out = {} for i, v in ipairs(t) do out[i] = math.type(v) .. ":" .. tostring(v) end
  return table.concat(out, ",")
end)
case("sort records", function()
  local t = {} for i = 1, 60 do t[i] = {k = (i * 37) % 61, id = i} end
  table.sort(t, function(a, b) return a.k < b.k end)
  local out = {} for i, v in ipairs(t) do out[i] = v.k end
  return table.concat(out, ",")
end)
case("sort __lt", function()
  local mt = {__lt = function(a, b) return a.v < b.v end}
  local t = {} for i = 1, 40 do t[i] = setmetatable({v = (i * 13) % 41}, mt) end
  table.sort(t)
  local out = {} for i, v in ipairs(t) do out[i] = v.v end
  return table.concat(out, ",")
end)
case("sort compare error", table.sort, {1, "x"})
case("sort compare tables", table.sort, {{}, {}})
case("sort bad comparator", table.sort, {1, 2, 3}, 1)
case("sort comparator nil", function() local t = {2, 1} table.sort(t, nil) return t[1], t[2] end)
case("sort comparator error", table.sort, {3, 2, 1}, function() error("boom", 0) end)
case("sort comparator error object", function()
  local ok, e = pcall(table.sort, {3, 2, 1}, function() error({code = 7}) end)
  return ok, type(e), e.code
end)
case("sort invalid order", table.sort, {5, 4, 3, 2, 1, 6, 7, 8}, function() return true end)
case("sort invalid order big", table.sort, data(100, 10), function(a, b) return a <= b end)
case("sort array too big", table.sort,
  setmetatable({}, {__len = function() return math.maxinteger end}))
-- The plain-array fast path (stdlib/table.c sort_fast): all integers or all strings in a
-- table without a metatable; anything else falls back to the general path mid-read.
case("sort fast integers", function()
  local t = {} for i = 1, 300 do t[i] = (i * 7919) % 263 - 131 end
  t[5], t[77], t[150] = math.mininteger, math.maxinteger, 0
  table.sort(t) return show(t, 300)
end)
case("sort fast duplicates", function()
  local t = {} for i = 1, 200 do t[i] = i % 3 end
  table.sort(t) return show(t, 200)
end)
case("sort fast strings", function()
  local t = {} for i = 1, 120 do t[i] = string.rep(string.char(97 + i % 5), i % 7) .. (i % 11) end
  t[3], t[9], t[40], t[41], t[42] = "", "a\0b", "a\0", "a", "a\0a"
  table.sort(t)
  for i = 1, #t do t[i] = string.format("%q", t[i]) end
  return table.concat(t, ",")
end)
case("sort fast falls back on a float", function()
  local t = {} for i = 1, 40 do t[i] = 40 - i end
  t[20] = 3.0 table.sort(t)
  local out = {} for i, v in ipairs(t) do out[i] = math.type(v) .. ":" .. tostring(v) end
  return table.concat(out, ",")
end)
case("sort fast int then string", table.sort, {3, 2, 1, "x", 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18})
case("sort fast string then int", table.sort, {"c", "b", "a", 1, "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r"})
case("sort fast hole", function()
  local t = {} for i = 1, 30 do t[i] = i end
  t[10] = nil t[30] = 1
  return pcall(table.sort, t)
end)
case("sort fast metatable", function()
  local t = setmetatable({}, {__index = function(_, k) return -k end})
  for i = 1, 20 do t[i] = i end
  table.sort(t) return show(t, 20)
end)
case("sort not table", table.sort, "abc")
case("sort one element bad cmp", table.sort, {1}, 5)
case("sort len meta", function()
  local t = setmetatable({5, 4, 3, 2, 1}, {__len = function() return 3 end})
  table.sort(t) return show(t)
end)

-- ---- utf8 ----------------------------------------------------------------------------------
local strings = {
  "", "abc", "h\u{E9}llo", "\u{20AC}\u{10348}x", "a\xffb", "\xC0\x80", "ab\xe9", "\xe9",
  "\u{D800}", "\xF4\x90\x80\x80", "\u{7FFFFFFF}", "\u{10FFFF}", "\x80abc", "abc\x80",
  "\xF8\x88\x80\x80\x80", "\u{7FF}\u{800}\u{FFFF}\u{10000}",
}
for si, s in ipairs(strings) do
  case("len " .. si, utf8.len, s)
  case("len lax " .. si, utf8.len, s, 1, -1, true)
  for _, i in ipairs({1, 2, -1, -2, 0, #s + 1, #s + 2}) do
    case("len from " .. si .. " " .. i, utf8.len, s, i)
    case("len to " .. si .. " " .. i, utf8.len, s, 1, i)
  end
  case("codepoint " .. si, utf8.codepoint, s, 1, -1)
  case("codepoint lax " .. si, utf8.codepoint, s, 1, -1, true)
  for _, i in ipairs({1, 2, -1, 0, #s, #s + 1}) do
    case("codepoint at " .. si .. " " .. i, utf8.codepoint, s, i)
  end
  for _, n in ipairs({-3, -1, 0, 1, 2, 3, 10}) do
    case("offset " .. si .. " " .. n, utf8.offset, s, n)
    for _, i in ipairs({1, 2, -1, #s + 1, #s + 2, 0}) do
      case("offset " .. si .. " " .. n .. " " .. i, utf8.offset, s, n, i)
    end
  end
end
case("len no args", utf8.len)
case("len float pos", utf8.len, "abc", 1.5)
case("codepoint reversed", utf8.codepoint, "abc", 3, 2)
case("codepoint long", function() return select("#", utf8.codepoint(("a"):rep(50000), 1, -1)) end)
case("codepoint too long", utf8.codepoint, ("a"):rep(1100000), 1, -1)
case("offset no n", utf8.offset, "abc")
case("char round trip", function()
  local s = utf8.char(72, 233, 8364, 0x10348, 0x7FFFFFFF)
  return utf8.len(s, 1, -1, true), utf8.codepoint(s, 1, -1, true)
end)
case("codes", function()
  local out = {}
  for p, c in utf8.codes("h\u{E9}\u{20AC}!") do out[#out + 1] = p .. "=" .. c end
  return table.concat(out, " ")
end)

-- utf8.codes over every string above, strict and lax, and its iterator called directly with
-- positions a loop never passes (moonbox's own iterator; 5.4.4 skips stray continuation bytes)
local function codes_of(s, lax)
  local out = {}
  for p, c in utf8.codes(s, lax) do out[#out + 1] = p .. "=" .. c end
  return table.concat(out, " ")
end
for si, s in ipairs(strings) do
  case("codes " .. si, codes_of, s)
  case("codes lax " .. si, codes_of, s, true)
end
for _, s in ipairs({"a\x80b", "\x80\x80a", ("\x80"):rep(5) .. "a", ("\x80"):rep(6) .. "a",
                    ("\x80"):rep(1000) .. "a" .. ("\xbf"):rep(7), "a\x80\x80\x80\x80\x80\x80"}) do
  case("codes stray " .. #s, codes_of, s)
end
do
  local f, s0, i0 = utf8.codes("h\u{E9}llo")
  case("codes first", function() return f == utf8.codes("x"), s0, i0 end)
  case("codes lax differs", function() return f == utf8.codes("x", true) end)
  local positions = {-1, 0, 1, 2, 3, 6, 7, 100, 2^53, math.mininteger, math.maxinteger, 1.5, "2"}
  for _, i in ipairs(positions) do
    case("codes step " .. tostring(i), f, "h\u{E9}llo", i)
  end
  case("codes step no position", f, "abc")
  case("codes step table position", f, "abc", {})
  case("codes step number subject", f, 123, 1)
end
local function codes_triple(...)
  local f, s, i = utf8.codes(...)
  return type(f), s, i
end
case("codes no args", codes_triple)
case("codes table", codes_triple, {})
case("codes number", codes_triple, 42)
case("codes invalid", codes_of, "ab\xff")
case("codes surrogate", codes_of, "\u{D800}")
case("codes surrogate lax", codes_of, "\u{D800}", true)
case("codes truncated", codes_of, "a\xe9")
case("codes iterator error", function() for p, c in utf8.codes("a") do error("x") end end)

print("cases", count)
