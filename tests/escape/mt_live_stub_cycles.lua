-- expect: ok
-- Attack: the live stubs of events a metatable lacked (8009460) and the live reads of
-- __tostring, __name and __pairs (5bc1550), driven into cycles that stay in C, where no hook
-- fires (THREATS P0 item 4, section 12): a late __lt whose handler is the object itself, with a
-- late __call that compares again; __tostring and __pairs that are the object, with __call
-- tostring and pairs; a late __call that is a callable table (stock retries it without bound
-- in one instruction); __le falling back to a __lt that is again a stub's object; a string
-- operand whose library arithmetic passes the event to a stub. Each ends at once with an
-- error; none may hang, and a late __call that is not a function is refused at the call.
local mt = {}
local o = setmetatable({}, mt)
local function fails(what, f, ...)
  local ok, err = pcall(f, ...)
  if ok then print("ESCAPED: " .. what .. " returned") end
  return tostring(err)
end
mt.__lt = o
mt.__call = function() return o < o end
assert(fails("__lt cycle", function() return o < o end):find("stack overflow", 1, true))
mt.__le = nil
assert(fails("__le by __lt cycle", function() return o <= o end):find("stack overflow", 1, true))
mt.__call = nil
mt.__tostring = o
mt.__call = tostring
assert(fails("__tostring cycle", tostring, o):find("stack overflow", 1, true))
mt.__tostring = nil
mt.__pairs = o
mt.__call = pairs
assert(fails("__pairs cycle", pairs, o):find("stack overflow", 1, true))
mt.__pairs = nil
-- A late __call that is a table, itself callable through a stub, or the object itself.
mt.__call = o
local err = fails("__call = self", o)
assert(err:find("must be a function", 1, true), err)
mt.__call = setmetatable({}, {__call = function() return "ESCAPED: a table as __call ran" end})
err = fails("__call = callable table", o, 1)
assert(err:find("must be a function", 1, true), err)
-- Arithmetic with a string operand: the string library's __add passes it to the stub, whose
-- handler adds the string again.
mt.__call = nil
local calls = 0
mt.__add = function(a, b) calls = calls + 1 return "1" + b end
assert(fails("string arithmetic cycle", function() return "1" + o end):find("stack overflow", 1, true))
assert(calls > 10 and calls < 1000, "bounded by the C stack: " .. calls)
-- A late __add that is pcall: the stub calls pcall(o, o), whose __call is pcall again.
mt.__add = pcall
mt.__call = pcall
local ok, inner = pcall(function() return o + o end)
assert(ok and inner == true, "pcall caught the C stack overflow at the bottom: " .. tostring(inner))
-- Yields across a stub and a live __pairs still work.
mt.__add = function(a, b) return coroutine.yield("add") end
mt.__pairs = function(t) coroutine.yield("pairs") return next, {1}, nil end
local co = coroutine.wrap(function()
  local s = o + 1
  local n = 0
  for _ in pairs(o) do n = n + 1 end
  return s, n
end)
assert(co() == "add" and co(41) == "pairs")
local s, n = co()
assert(s == 41 and n == 1, "yields across stubs: " .. tostring(s) .. " " .. tostring(n))
return calls
