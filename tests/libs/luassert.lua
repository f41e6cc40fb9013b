-- luassert and say (Debian's lua-luassert and lua-say) under moonbox and stock lua5.4:
-- tests/libs/test_libs.sh. Assertions that pass, and ones that fail (caught with pcall, their
-- messages compared).
-- packages: lua-luassert lua-say
-- luadir: 5.4
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

local say = require "say"
local assert = require "luassert"
local spy = require "luassert.spy"
local stub = require "luassert.stub"
local mock = require "luassert.mock"
local match = require "luassert.match"

-- say: the message store luassert's texts come from.
say:set_namespace("en")
say:set("greeting", "Hello, %s! You have %d messages.")
check("say", function() return say("greeting", {"ann", 3}), say("missing.key") end)
check("say namespace", function()
  say:set_namespace("fr")
  say:set("greeting", "Bonjour, %s !")
  local fr = say("greeting", {"ann"})
  local fallback = say("assertion.same.positive")
  say:set_namespace("en")
  return fr, fallback, say("greeting", {"bob", 1})
end)

-- Passing assertions.
check("same", function() assert.are.same({1, {a = "x"}}, {1, {a = "x"}}) return "ok" end)
check("equal/truthy", function() assert.equal(3, 1 + 2); assert.is_true(true); assert.truthy("x"); assert.falsy(nil); return "ok" end)
check("not", function() assert.are_not.equal({}, {}); assert.is_not.same({1}, {2}); return "ok" end)
check("types", function() assert.is_string("s"); assert.is_number(1); assert.is_table({}); assert.is_function(print); assert.is_nil(nil); assert.is_boolean(false); return "ok" end)
check("errors", function()
  assert.has_error(function() error("bad thing", 0) end, "bad thing")
  assert.has_no.errors(function() end)
  assert.error_matches(function() error("code 42") end, "code %d+")
  return "ok"
end)
check("matches/near/unique", function() assert.matches("^h.llo$", "hello"); assert.is.near(1.0, 1.05, 0.1); assert.is.unique({1, 2, 3}); return "ok" end)
check("returned_arguments", function() assert.returned_arguments(2, function(...) return select("#", ...) end, 1, 2); return "ok" end)

-- Failing assertions: the message is what a test runner would show.
local function fails(f) local ok, err = pcall(f); return ok, type(err) == "table" and tostring(err.message or err) or err end
check("fail same", fails, function() assert.are.same({1, 2}, {1, 3}) end)
check("fail same nested", fails, function() assert.same({a = {b = "x"}}, {a = {b = "y"}}) end)
check("fail equal", fails, function() assert.are.equal("expected", "actual") end)
check("fail equal message", fails, function() assert.are.equal(1, 2, "custom message") end)
check("fail is_true", fails, function() assert.is_true(false) end)
check("fail truthy", fails, function() assert.truthy(nil) end)
check("fail has_error", fails, function() assert.has_error(function() end) end)
check("fail error message", fails, function() assert.has_error(function() error("x", 0) end, "y") end)
check("fail matches", fails, function() assert.matches("^a", "banana") end)
check("fail near", fails, function() assert.is.near(1, 2, 0.5) end)
check("fail type", fails, function() assert.is_number("1") end)
check("fail not", fails, function() assert.is_not.equal(1, 1) end)
check("fail unique", fails, function() assert.is.unique({1, 2, 1}) end)
check("fail plain assert", fails, function() assert(false, "plain message") end)
check("fail plain assert no message", fails, function() assert(nil) end)

-- Spies, stubs, mocks and matchers.
check("spy", function()
  local s = spy.new(function(a, b) return a + b end)
  local r = s(1, 2)
  s("x", "y") -- raises inside: caught below
  return r
end)
check("spy calls", function()
  local s = spy.new(function() end)
  s(1); s(2, "two"); s({k = 1})
  assert.spy(s).was.called(3)
  assert.spy(s).was.called_with(2, "two")
  assert.spy(s).was_not.called_with(9)
  assert.spy(s).was.called_with(match.is_table())
  return #s.calls, s.calls[2].vals[2]
end)
check("spy fail", fails, function()
  local s = spy.new(function() end)
  s(1)
  assert.spy(s).was.called_with(2)
end)
check("spy.on", function()
  local obj = {greet = function(self, n) return "hi " .. n end}
  spy.on(obj, "greet")
  local r = obj:greet("ann")
  assert.spy(obj.greet).was.called_with(match.is_ref(obj), "ann")
  obj.greet:revert()
  return r, spy.is_spy(obj.greet)
end)
check("stub", function()
  local obj = {fetch = function() error("network") end}
  stub(obj, "fetch").returns("cached", 2)
  local a, b = obj.fetch("url")
  assert.stub(obj.fetch).was.called_with("url")
  obj.fetch:revert()
  return a, b, pcall(obj.fetch)
end)
check("stub on_call_with", function()
  local s = stub.new()
  s.on_call_with(1).returns("one")
  s.on_call_with(2).returns("two")
  return s(1), s(2), s(3)
end)
check("mock", function()
  local api = {add = function(a, b) return a + b end, name = "api"}
  local m = mock(api)
  local r = m.add(2, 3)
  assert.spy(m.add).was.called(1)
  mock.revert(m)
  return r, m.name, spy.is_spy(m.add)
end)
check("matchers", function()
  assert.is_true(match.is_number()(1))
  assert.is_false(match.is_string()(1))
  assert.is_true(match.same({1})({1}))
  assert.is_true(match.matches("^ab")("abc"))
  assert.is_true(match.is_not.is_nil()(0))
  assert.is_true(match.is_all_of(match.is_number(), match.is_truthy())(5))
  assert.is_true(match.is_any_of(match.is_string(), match.is_table())({}))
  assert.is_true(match._(nil))
  return "ok"
end)

-- Extending luassert: a custom assertion with its messages in say.
local function is_even(state, args) return type(args[1]) == "number" and args[1] % 2 == 0 end
say:set("assertion.is_even.positive", "Expected %s to be even")
say:set("assertion.is_even.negative", "Expected %s not to be even")
assert:register("assertion", "even", is_even, "assertion.is_even.positive", "assertion.is_even.negative")
check("custom assertion", function() assert.is.even(4); assert.is_not.even(3); return "ok" end)
check("custom assertion fail", fails, function() assert.is.even(7) end)
check("custom formatter", function()
  assert:add_formatter(function(v) if type(v) == "string" and v:sub(1, 1) == "@" then return "<handle " .. v:sub(2) .. ">" end end)
  return fails(function() assert.are.equal("@a", "@b") end)
end)
check("parameters", function()
  assert:set_parameter("TableFormatLevel", 1)
  local r = table.pack(fails(function() assert.same({a = {b = {c = 1}}}, {a = {b = {c = 2}}}) end))
  assert:set_parameter("TableFormatLevel", 3)
  return table.unpack(r, 1, r.n)
end)
