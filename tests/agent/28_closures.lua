-- Agent task: "Build counters, a memoised function and a pipeline of transforms."
-- expect-value: {"adders":[11,12,13],"c1":3,"c2":80,"calls":81,"fib80":23416728348467685,"piped":"hello_big_world!"}
local function counter(start, step)
  local n = start
  return function() n = n + step return n end
end
local c1, c2 = counter(0, 1), counter(100, -10)
c1() c1()
c2()
local calls = 0
local function memoize(f)
  local cache = {}
  return function(n)
    if cache[n] == nil then cache[n] = f(n) end
    return cache[n]
  end
end
local fib
fib = memoize(function(n)
  calls = calls + 1
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end)
local function compose(...)
  local fns = {...}
  return function(x)
    for _, f in ipairs(fns) do x = f(x) end
    return x
  end
end
local pipeline = compose(function(s) return s:lower() end, function(s) return (s:gsub("%s+", "_")) end,
  function(s) return s .. "!" end)
local adders = {}
for i = 1, 3 do adders[i] = function(x) return x + i end end
return {c1 = c1(), c2 = c2(), fib80 = fib(80), calls = calls, piped = pipeline("Hello  Big World"),
  adders = {adders[1](10), adders[2](10), adders[3](10)}}
