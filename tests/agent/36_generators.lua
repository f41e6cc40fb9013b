-- Agent task: "Generate primes, paginate a list and produce permutations with coroutines."
-- expect-value: {"pages":["a,b,c","d,e,f","g"],"perms":["xyz","xzy","yxz","yzx","zxy","zyx"],"primes":[2,3,5,7,11,13,17,19,23,29]}
local function primes()
  return coroutine.wrap(function()
    local found = {}
    local n = 2
    while true do
      local is_prime = true
      for _, p in ipairs(found) do
        if p * p > n then break end
        if n % p == 0 then is_prime = false break end
      end
      if is_prime then
        found[#found + 1] = n
        coroutine.yield(n)
      end
      n = n + 1
    end
  end)
end
local first = {}
for p in primes() do
  if #first == 10 then break end
  first[#first + 1] = p
end
local function pages(items, size)
  return coroutine.wrap(function()
    for i = 1, #items, size do
      coroutine.yield(table.concat(items, ",", i, math.min(i + size - 1, #items)))
    end
  end)
end
local paged = {}
for page in pages({"a", "b", "c", "d", "e", "f", "g"}, 3) do paged[#paged + 1] = page end
local function permute(a, n)
  n = n or #a
  if n <= 1 then
    coroutine.yield(table.concat(a))
  else
    for i = 1, n do
      a[n], a[i] = a[i], a[n]
      permute(a, n - 1)
      a[n], a[i] = a[i], a[n]
    end
  end
end
local perms = {}
for p in coroutine.wrap(function() permute({"x", "y", "z"}) end) do perms[#perms + 1] = p end
table.sort(perms)
return {primes = first, pages = paged, perms = perms}
