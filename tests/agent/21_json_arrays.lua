-- Agent task: "Emit the result as JSON with an explicit (possibly empty) tags array."
-- expect-value: {"empty_arr":"[]","empty_obj":"{}","items":"[{\"id\":1,\"tags\":[\"new\",\"sale\"]},{\"id\":2,\"tags\":[]}]","nested":"{\"big\":9007199254740993,\"matrix\":[[1,2],[3,4]],\"ok\":true,\"ratio\":0.25}","reencoded":"[]","same_module":true,"sparse":"{\"1\":\"a\",\"3\":\"c\"}"}
local json = require("json")
local items = {
  {id = 1, tags = {"new", "sale"}},
  {id = 2, tags = {}},
}
for _, item in ipairs(items) do
  item.tags = json.array(item.tags)
end
local empty_obj = json.encode({})
local empty_arr = json.encode(json.array())
local sparse = json.encode({[1] = "a", [3] = "c"})
local nested = json.encode({matrix = {{1, 2}, {3, 4}}, ok = true, ratio = 0.25, big = 9007199254740993})
local decoded_empty = json.decode("[]")
return {
  items = json.encode(items),
  empty_obj = empty_obj,
  empty_arr = empty_arr,
  sparse = sparse,
  nested = nested,
  reencoded = json.encode(decoded_empty),
  same_module = require("cjson") == require("json") and json == require("dkjson"),
}
