-- Agent task: "Parse the config string into typed settings."
-- expect-value: {"config":{"debug":true,"empty":null,"host":"db.internal","name":"orders service","port":5432,"ratio":0.75,"retries":3},"order":"host,port,debug,ratio,name,retries,empty","port_type":"integer"}
local text = "host = db.internal; port=5432;  debug=true ; ratio = 0.75; name='orders service'; retries=3;empty=;"
local config, order = {}, {}
for key, value in text:gmatch("%s*([%w_]+)%s*=%s*([^;]-)%s*;") do
  local typed
  if value == "true" or value == "false" then
    typed = value == "true"
  elseif tonumber(value) then
    typed = math.tointeger(tonumber(value)) or tonumber(value)
  elseif value:match("^'.*'$") then
    typed = value:sub(2, -2)
  elseif value == "" then
    typed = json.null
  else
    typed = value
  end
  config[key] = typed
  order[#order + 1] = key
end
return {config = config, order = table.concat(order, ","), port_type = math.type(config.port)}
