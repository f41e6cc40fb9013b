-- tests/compat/classes.lua: class patterns real programs use, whose output must match stock
-- lua5.4 byte for byte (issue 26, item 3): Programming in Lua's A:new, a middleclass-style
-- class library, inheritance built in any order, setmetatable(M, M), weak caches. Run by
-- run_compat.sh in moonbox and in lua5.4. No output that depends on pairs order or addresses.

-- Programming in Lua: the metatable gets its __index after setmetatable.
local Account = {balance = 0}
function Account:new(o)
  o = o or {}
  setmetatable(o, self)
  self.__index = self
  return o
end
function Account:deposit(v) self.balance = self.balance + v end
function Account:withdraw(v)
  if v > self.balance then error("insufficient funds", 0) end
  self.balance = self.balance - v
end
local a = Account:new()
a:deposit(100)
print("PIL account", a.balance, Account.balance)
local SpecialAccount = Account:new()
function SpecialAccount:withdraw(v)
  if v - self.balance >= self:getLimit() then error("insufficient funds", 0) end
  self.balance = self.balance - v
end
function SpecialAccount:getLimit() return self.limit or 0 end
local s = SpecialAccount:new{limit = 1000.00}
s:deposit(100.00)
s:withdraw(200.00)
print("PIL special", s.balance, s:getLimit(), pcall(s.withdraw, s, 5000))
print("PIL first object", getmetatable(a) == Account, a.deposit == Account.deposit)

-- A middleclass-style library: classes with __index/__tostring/__call metamethods set up
-- after the instances' metatables exist, subclasses, class methods, weak subclass sets.
local function class(name, super)
  local cls = {name = name, static = {}, __instanceDict = {}, subclasses = setmetatable({}, {__mode = "k"})}
  cls.__instanceDict.__index = cls.__instanceDict
  if super then
    setmetatable(cls.__instanceDict, {__index = super.__instanceDict})
    super.subclasses[cls] = true
  end
  setmetatable(cls, {
    __index = cls.static,
    __tostring = function() return "class " .. name end,
    __call = function(c, ...) return c:new(...) end,
  })
  cls.static.new = function(c, ...)
    local o = setmetatable({class = c}, c.__instanceDict)
    if o.initialize then o:initialize(...) end
    return o
  end
  cls.__instanceDict.__tostring = function(o) return "instance of " .. o.class.name end
  return cls
end
local Animal = class("Animal")
function Animal.__instanceDict:initialize(sound) self.sound = sound end
function Animal.__instanceDict:speak() return self.sound .. "!" end
local Dog = class("Dog", Animal)
function Dog.__instanceDict:initialize() Animal.__instanceDict.initialize(self, "woof") end
local d = Dog()
print("middleclass", tostring(Dog), tostring(d), d:speak(), Animal("meow"):speak())
local n = 0
for _ in pairs(Animal.subclasses) do n = n + 1 end
print("middleclass subclasses", n)

-- Inheritance built top down, bottom up and after objects exist.
local Base = {} Base.__index = Base
function Base:who() return "base" end
local Mid = {} Mid.__index = Mid
function Mid:mid() return "mid" end
local Leaf = {} Leaf.__index = Leaf
local leaf = setmetatable({}, Leaf)      -- an object first
setmetatable(Leaf, Mid)                   -- then its class's base
setmetatable(Mid, Base)                   -- then the base's base
print("any order", leaf:mid(), leaf:who(), leaf.none)
function Base:late() return "late" end    -- a method added to the root later
print("late method", leaf:late())

-- A three-level chain built the usual way, looked up many times.
local L1 = {} L1.__index = L1
function L1:m() return 1 end
local L2 = setmetatable({}, L1) L2.__index = L2
local L3 = setmetatable({}, L2) L3.__index = L3
local o3 = setmetatable({}, L3)
local sum = 0
for _ = 1, 1000 do sum = sum + o3:m() end
print("three levels", sum)

-- setmetatable(M, M): a module table as its own metatable.
local M = {} M.__index = M M.value = 42
setmetatable(M, M)
print("M, M", M.value, select(2, pcall(function() return M.missing end)))
local W = {} W.__newindex = W
setmetatable(W, W)
print("W, W", select(2, pcall(function() W.x = 1 end)))

-- A deep chain (past what one instruction may follow in moonbox).
local deep = {bottom = "found"}
for _ = 1, 100 do deep = setmetatable({}, {__index = deep}) end
print("deep chain", deep.bottom, deep.nothing)

-- __index and __newindex functions set after setmetatable.
local proxyMt = {}
local store = {}
local proxy = setmetatable({}, proxyMt)
proxyMt.__index = function(_, k) return store[k] end
print("index function later", proxy.x)

-- Weak caches.
local cache = setmetatable({}, {__mode = "k"})
local key = {}
cache[key] = "kept"
cache[{}] = "dropped"
collectgarbage()
collectgarbage()
local entries = 0
for _ in pairs(cache) do entries = entries + 1 end
print("weak keys", entries, cache[key])
local values = setmetatable({}, {__mode = "v"})
values[1] = {}
values[2] = key
collectgarbage()
print("weak values", values[1], values[2] == key)
