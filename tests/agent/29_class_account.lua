-- Agent task: "Model bank accounts with a class, a subclass and error objects for overdrafts."
-- expect-value: {"a":"Account(ada, 120.00)","is_account":true,"log":"+50 -30","overdraft":[false,"OVERDRAFT",350],"s":"Account(bob, 210.00)"}
local Account = {}
Account.__index = Account
Account.__tostring = function(a) return string.format("Account(%s, %.2f)", a.owner, a.balance) end
function Account.new(owner, balance)
  return setmetatable({owner = owner, balance = balance or 0, log = {}}, Account)
end
function Account:deposit(v)
  self.balance = self.balance + v
  self.log[#self.log + 1] = "+" .. v
end
function Account:withdraw(v)
  if v > self.balance then
    error({code = "OVERDRAFT", need = v - self.balance})
  end
  self.balance = self.balance - v
  self.log[#self.log + 1] = "-" .. v
end

local Savings = setmetatable({}, {__index = Account})
Savings.__index = Savings
Savings.__tostring = Account.__tostring
function Savings.new(owner, balance, rate)
  local s = Account.new(owner, balance)
  s.rate = rate
  return setmetatable(s, Savings)
end
function Savings:accrue() self:deposit(self.balance * self.rate) end

local a = Account.new("ada", 100)
a:deposit(50)
local ok, err = pcall(a.withdraw, a, 500)
a:withdraw(30)
local s = Savings.new("bob", 200, 0.05)
s:accrue()
return {
  a = tostring(a), s = tostring(s), log = table.concat(a.log, " "),
  overdraft = {ok, err.code, err.need},
  is_account = getmetatable(s) == Savings and Savings.deposit == Account.deposit,
}
