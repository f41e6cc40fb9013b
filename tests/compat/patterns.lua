-- tests/compat/patterns.lua: pattern matching cases whose output must match stock lua5.4 byte for byte.
-- Run by run_compat.sh in moonbox and in lua5.4. No string.rep or table.concat (not in the
-- sandbox yet; nor is table.unpack): long strings are built by doubling.

local function rep(s, n)
  local out = ""
  while n > 0 do
    if n % 2 == 1 then out = out .. s end
    s = s .. s
    n = n // 2
  end
  return out
end

-- Render any list of results on one line, with types where print would hide them.
local function render(r)
  local out = "(" .. r.n .. ")"
  for i = 1, r.n do
    local v = r[i]
    local t = type(v)
    if t == "string" then out = out .. " s:" .. string.format("%q", v)
    elseif t == "number" then out = out .. " " .. math.type(v):sub(1, 1) .. ":" .. tostring(v)
    else out = out .. " " .. tostring(v) end
  end
  return out
end

local count = 0
local function case(label, f, ...)
  count = count + 1
  -- Not a tail call: argument errors then name the function the same way in both runtimes.
  local r = table.pack(pcall(f, ...))
  local s = render(r)
  print(count .. " " .. label .. " -> " .. s)
end

local function find(...) local a, b, c, d, e = string.find(...) return a, b, c, d, e end
local function match(...) local a, b, c, d = string.match(...) return a, b, c, d end
local function gsub(...) local a, b = string.gsub(...) return a, b end
local function gm(s, p, init)
  local out, n = "", 0
  for a, b, c in string.gmatch(s, p, init) do
    n = n + 1
    out = out .. "[" .. tostring(a) .. (b ~= nil and ("," .. tostring(b)) or "") ..
          (c ~= nil and ("," .. tostring(c)) or "") .. "]"
    if n > 200 then break end
  end
  return out, n
end

-- 1. A cross product of subjects and patterns through find, match, gmatch and gsub.
local subjects = {
  "", "a", "aaa", "abc", "hello world", "  key = value  ", "x=1, y=22, z=333",
  "THE (quick) fox", "f(a(b)c)d", "one\ntwo\n", "\0a\0b", "[]%-^$", "ab12cd34",
  "caf\195\169", "aXbXc",
}
local patterns = {
  "", "a", "a*", "a+", "a-", "a?", ".", ".-", ".*", "^a", "a$", "^$", "^.-$", "%a+", "%d+",
  "%s*", "%w+", "%p", "%u%l*", "%x+", "%c", "%g+", "%S+", "[abc]", "[^abc]+", "[a-c]+",
  "[%a_][%w_]*", "(%w+)=(%w+)", "(%w+)%s*=%s*(%w+)", "()a()", "%b()", "%f[%w]%w+",
  "%f[%W]", "(a)(b)(c)", "(.)%1", "[]]", "[^]]", "[a-]", "[%]]", "%z", "X", "b.*X",
  "(h)(e)(l)(l)(o)", "[%d%-]+", "^(%s*)(.-)(%s*)$",
}
for _, s in ipairs(subjects) do
  for _, p in ipairs(patterns) do
    local tag = string.format("%q ~ %q", s, p)
    case("find " .. tag, find, s, p)
    case("match " .. tag, match, s, p)
    case("gmatch " .. tag, gm, s, p)
    case("gsub " .. tag, gsub, s, p, "<%0>")
  end
end

-- 2. init arguments: negative, zero, past the end.
for _, init in ipairs({-100, -4, -3, -1, 0, 1, 2, 3, 4, 5, 6, 100, math.mininteger, math.maxinteger}) do
  case("find init " .. init, find, "abcab", "ab", init)
  case("find plain init " .. init, find, "abcab", "ab", init, true)
  case("find empty init " .. init, find, "abcab", "", init)
  case("match init " .. init, match, "abcab", "(a)(.)", init)
  case("gmatch init " .. init, gm, "abcab", "a.", init)
  case("gmatch empty init " .. init, gm, "abc", "", init)
end

-- 3. Plain find and specials.
case("plain dot", find, "a.b", ".", 1, true)
case("plain magic", find, "x^$*+?.([%-]y", "^$*+?.([%-]", 1, true)
case("plain nul", find, "a\0b\0c", "\0c")
case("plain long", find, rep("ab", 1000) .. "abc", "abc")
case("plain miss", find, rep("ab", 1000), "abc")
case("plain false arg", find, "a.b", ".", 1, false)
case("plain nil arg", find, "a.b", ".", 1, nil)
case("no specials paren close", find, "a)b", ")")
case("plain needle longer", find, "ab", "abc")

-- 4. Quantifiers and backtracking.
case("greedy", match, "<a><b>", "<(.*)>")
case("lazy", match, "<a><b>", "<(.-)>")
case("opt", match, "color colour", "colou?r")
case("star backtrack", match, "aaab", "a*ab")
case("plus none", find, "bbb", "a+")
case("minus end", match, "abc", "a.-$")
case("nested opt", find, rep("a", 10), rep("a?", 10) .. rep("a", 10))
case("anchor only at start", find, "a^b", "a^b")
case("dollar mid", find, "a$b", "a$b")
case("dollar end", find, "ab$", "b$")
case("dollar literal", find, "ab$", "b%$")
case("caret in gmatch", gm, "^a^a", "^a")
case("gsub anchored", gsub, "aaa", "^a", "b")
case("gsub anchored empty", gsub, "aaa", "^", "b")
case("gsub empty", gsub, "abc", "", "-")
case("gsub star", gsub, "abc", "x*", "-")
case("gsub after match empty", gsub, "hello world", "%w*", "X")
case("gmatch after match empty", gm, "hello world", "%w*")

-- 5. Captures.
case("position captures", find, "hello", "()ll()")
case("position only", match, "hello", "()")
case("nested captures", match, "abcd", "((a)(b(c)))(d)")
case("backref", match, "xyzxyz", "(x.z)%1")
case("backref miss", match, "xyzxya", "(x.z)%1")
case("backref position", find, "aa", "()%1")
case("backref quotes", match, [[say "hi" and 'yo']], "([\"'])(.-)%1")
case("many captures", match, "abcdefghijklmnopqrstuvwxyzABCDEF",
  "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)(m)(n)(o)(p)(q)(r)(s)(t)(u)(v)(w)(x)(y)(z)(A)(B)(C)(D)(E)(F)")
case("too many captures", match, "abcdefghijklmnopqrstuvwxyzABCDEFG",
  "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)(m)(n)(o)(p)(q)(r)(s)(t)(u)(v)(w)(x)(y)(z)(A)(B)(C)(D)(E)(F)(G)")
case("empty capture", match, "abc", "a()()b")
case("capture in find", find, "key=val", "(%w+)=(%w+)")
case("gmatch captures", gm, "a=1, b=2, c=3", "(%w+)=(%w+)")
case("gmatch positions", gm, "abc", "()")

-- 6. %b and %f.
case("balanced", match, "x = f(a, g(b), c) + 1", "%b()")
case("balanced same", match, "'a' 'b'", "%b''")
case("balanced unclosed", match, "((a)", "%b()")
case("balanced brackets", gsub, "[x][[y]]z", "%b[]", "#")
case("frontier words", gm, "THE (quick) fox", "%f[%a]%a+")
case("frontier end", gsub, "the cat sat", "%f[%W]", "|")
case("frontier start of subject", find, "abc", "%f[a]")
case("frontier nul", find, "\0", "%f[%z]")
case("frontier end of subject", find, "ab", "%f[%z]")
case("frontier complement", gm, "aa bb", "%f[^ ]")

-- 7. Sets and classes over all bytes.
local all = ""
for i = 0, 255 do all = all .. string.char(i) end
for _, cl in ipairs({"%a", "%c", "%d", "%g", "%l", "%p", "%s", "%u", "%w", "%x", "%z",
                     "%A", "%C", "%D", "%G", "%L", "%P", "%S", "%U", "%W", "%X", "%Z",
                     ".", "[%a%d]", "[^%a%d]", "[a-fA-F0-9]", "[%w_.-]", "[\128-\255]", "[z-a]",
                     "%q", "%.", "%%", "[%]-]", "[-a]", "[a-%d]"}) do
  local n = select(2, string.gsub(all, cl, ""))
  local first, last = string.find(all, cl .. "+")
  case("class " .. cl, function() return n, first, last end)
  -- The exact members, byte by byte (the classes are plain ASCII ranges in pattern.c).
  case("class members " .. cl, function()
    local hits = {}
    for c in string.gmatch(all, cl) do hits[#hits + 1] = string.byte(c) end
    return table.concat(hits, ",")
  end)
end

-- 8. gsub replacements.
case("repl %1", gsub, "hello world", "(o)", "[%1]")
case("repl %0", gsub, "hello", "l+", "<%0>")
case("repl %%", gsub, "50", "%d+", "%0%%")
case("repl %1 no captures", gsub, "abc", "b", "%1%1")
case("repl position", gsub, "abc", "()b", "%1")
case("repl table", gsub, "$name is $age", "%$(%w+)", {name = "Ann", age = 33})
case("repl table miss", gsub, "$x $y", "%$(%w+)", {x = "1"})
case("repl table false", gsub, "$x", "%$(%w+)", {x = false})
case("repl table number", gsub, "$x $y", "%$(%w+)", {x = 1.5, y = 2})
case("repl table position key", gsub, "abc", "()", {[1] = "<", [4] = ">"})
case("repl function", gsub, "a b c", "%a", function(c) return c:upper() .. c end)
case("repl function nil", gsub, "a b c", "%a", function(c) if c == "b" then return "B" end end)
case("repl function captures", gsub, "k1=v1;k2=v2", "(%w+)=(%w+)", function(k, v) return v .. "=" .. k end)
case("repl function float", gsub, "x", "x", function() return 2^53 end)
case("repl function int", gsub, "x", "x", function() return 7 end)
case("repl function table", gsub, "x", "x", function() return {} end)
case("repl function true", gsub, "x", "x", function() return true end)
case("repl number", gsub, "abc", "b", 42)
case("repl float", gsub, "abc", "b", 0.5)
case("repl max 0", gsub, "aaa", "a", "b", 0)
case("repl max 2", gsub, "aaa", "a", "b", 2)
case("repl max negative", gsub, "aaa", "a", "b", -1)
case("repl max float", gsub, "aaa", "a", "b", 2.0)
case("repl max bad float", gsub, "aaa", "a", "b", 2.5)
case("repl max string", gsub, "aaa", "a", "b", "1")
case("repl unchanged", gsub, "abc", "x", "y")
case("repl trailing percent", gsub, "abc", "b", "x%")
case("repl bad escape", gsub, "abc", "b", "%x")
case("repl bad index", gsub, "abc", "b", "%2")
case("repl bad index with capture", gsub, "abc", "(b)", "%3")
case("repl unfinished", gsub, "abc", "(b", "%1")
case("repl unfinished unused", gsub, "abc", "(b", "x")
case("repl unfinished function", gsub, "abc", "(b", print)
case("repl bad type", gsub, "abc", "b", true)
case("repl missing", gsub, "abc", "b")
case("repl nul", gsub, "a\0b", "%z", "\0\0")
case("repl metatable index", gsub, "a b", "%a", setmetatable({}, {__index = function(_, k) return k .. k end}))

-- 9. Errors.
case("err ends with %", find, "abc", "a%")
case("err missing ]", find, "abc", "a[b")
case("err missing ] escaped", find, "abc", "a[%]")
case("err missing ] caret", match, "abc", "[^")
case("err %b args", find, "abc", "%b(")
case("err %f no [", find, "abc", "%fa")
case("err %f at end", find, "abc", "%f")
case("err invalid capture )", match, "abc", "a)")
case("err invalid capture index", match, "abc", "%1")
case("err capture index 0", match, "abc", "(a)%0")
case("err open capture backref", match, "abc", "(a%1)")
case("err unfinished capture", match, "abc", "(a")
case("err unfinished capture find", find, "abc", "(a")
case("lazy error not reached", find, "abc", "x[")
case("lazy error reached", find, "xbc", "x[")
case("err too complex", find, rep("a", 300), rep("a?", 300) .. "b")
case("err arg 1", find, nil, "a")
case("err arg 2", find, "a", {})
case("err arg 3", find, "a", "a", "x")
case("err gmatch arg", gm, "a", nil)
case("err gsub arg 1", gsub, {}, "a", "b")

-- 10. Coercion of numbers.
case("number subject", find, 12345, 34)
case("float subject", match, 1.5, "%d")
case("number pattern", gsub, 1000, 0, 1)
case("int replacement", gsub, "a", "a", 10)
case("method call", function() return ("hello"):find("l"), ("x=1"):match("(%w)=(%d)") end)

-- 11. gmatch iterators: direct calls, exhaustion, reuse after an error.
do
  local it = string.gmatch("ab", ".")
  case("gmatch direct 1", it)
  case("gmatch direct 2", it)
  case("gmatch direct end", it)
  case("gmatch direct end again", it)
  local bad = string.gmatch("abc", "(b)%2")
  case("gmatch error", bad)
  case("gmatch error again", bad)
end

-- 12. Longer subjects.
local long = rep("word ", 200) .. "end"
case("long count words", gsub, long, "%a+", "%0")
case("long last word", match, long, "(%a+)$")
case("long find far", find, long, "e(n)d")
case("long lazy", match, long, "^(.-)end")
case("long balanced", find, rep("(", 50) .. rep(")", 50), "%b()")
case("long gmatch count", function() local n = 0 for _ in long:gmatch("o") do n = n + 1 end return n end)

print("cases", count)
