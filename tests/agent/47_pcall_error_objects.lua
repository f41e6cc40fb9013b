-- Agent task: "Validate the records; collect all problems instead of stopping at the first."
-- args: --input {"records": [{"id": 1, "email": "a@b.c", "qty": 2}, {"id": 2, "email": "nope", "qty": 1}, {"id": 3, "qty": -4}, {"id": 4, "email": "d@e.f", "qty": "many"}]}
-- expect-value: {"assert_default":"47_pcall_error_objects.lua:25: assertion failed!","assert_msg":"math broke","flags":[false,false,false,false,false,false],"index":true,"nil_error":true,"plain":"plain message","problems":["2: ValidationError(email): no @ in nope","3: ValidationError(email): missing","4: ValidationError(qty): not an integer"],"valid":1,"xpcall":"handled: deep"}
local ValidationError = {}
ValidationError.__index = ValidationError
ValidationError.__tostring = function(e) return "ValidationError(" .. e.field .. "): " .. e.msg end
local function fail(field, msg) error(setmetatable({field = field, msg = msg}, ValidationError), 2) end
local function validate(r)
  if type(r.email) ~= "string" then fail("email", "missing") end
  if not r.email:find("@", 1, true) then fail("email", "no @ in " .. r.email) end
  if math.type(r.qty) ~= "integer" then fail("qty", "not an integer") end
  if r.qty <= 0 then fail("qty", "must be positive") end
  return true
end
local problems, valid = {}, 0
for _, r in ipairs(records) do
  local ok, err = pcall(validate, r)
  if ok then valid = valid + 1
  elseif getmetatable(err) == ValidationError then problems[#problems + 1] = r.id .. ": " .. tostring(err)
  else problems[#problems + 1] = r.id .. ": unexpected " .. tostring(err) end
end
local ok1, e1 = pcall(error, "plain message", 0)
local ok2, e2 = pcall(function() local x = {} return x.a.b end)
local ok3, e3 = pcall(function() assert(1 == 2, "math broke") end)
local ok4, e4 = pcall(function() assert(false) end)
local ok5, e5 = xpcall(function() error("deep") end, function(m) return "handled: " .. m:gsub("^.-:%d+: ", "") end)
local ok6, e6 = pcall(error)
return {
  valid = valid, problems = problems,
  plain = e1, index = e2:match("attempt to index a nil value %(field 'a'%)") ~= nil,
  assert_msg = e3:gsub("^.-:%d+: ", ""), assert_default = e4, xpcall = e5, nil_error = e6 == nil,
  flags = {ok1, ok2, ok3, ok4, ok5, ok6},
}
