-- Agent task: "Which fields are null in each record? Replace nulls with defaults."
-- expect-value: {"cleaned":[{"age":36,"email":"none","name":"ada"},{"age":0,"email":"x@y.z","name":"unknown"}],"encoded_null":"[null,1]","null_fields":["email","age+name"],"null_is_nil":false,"null_type":"userdata"}
local json = require("cjson")
local records = json.decode('[{"name": "ada", "email": null, "age": 36}, {"name": null, "email": "x@y.z", "age": null}]')
local defaults = {name = "unknown", email = "none", age = 0}
local null_fields = {}
for i, rec in ipairs(records) do
  local missing = {}
  for _, field in ipairs({"age", "email", "name"}) do
    if rec[field] == json.null then
      missing[#missing + 1] = field
      rec[field] = defaults[field]
    end
  end
  null_fields[i] = table.concat(missing, "+")
end
return {
  null_type = type(json.null),
  null_is_nil = json.null == nil,
  null_fields = null_fields,
  cleaned = records,
  encoded_null = json.encode({json.null, 1}),
}
