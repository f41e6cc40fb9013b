-- Agent task: "Parse the CSV (with quoted fields) and total the amount column per category."
-- expect-value: {"columns":["date","category","description","amount"],"descriptions":["Lunch, with team","Taxi","Coffee \"large\"","Paper","Train, return"],"totals":{"food":46.75,"office":12.0,"travel":79.75}}
local csv = 'date,category,description,amount\n' ..
  '2024-02-01,food,"Lunch, with team",42.50\n' ..
  '2024-02-02,travel,Taxi,18\n' ..
  '2024-02-02,food,"Coffee ""large""",4.25\n' ..
  '2024-02-03,office,Paper,12.00\n' ..
  '2024-02-04,travel,"Train, return",61.75\n'

local function split_csv_line(line)
  local fields, pos = {}, 1
  while pos <= #line + 1 do
    if line:sub(pos, pos) == '"' then
      local value, i = "", pos + 1
      while true do
        local q = line:find('"', i, true)
        value = value .. line:sub(i, q - 1)
        if line:sub(q + 1, q + 1) == '"' then
          value, i = value .. '"', q + 2
        else
          pos = q + 2
          break
        end
      end
      fields[#fields + 1] = value
    else
      local stop = line:find(",", pos, true) or #line + 1
      fields[#fields + 1] = line:sub(pos, stop - 1)
      pos = stop + 1
    end
  end
  return fields
end

local header, totals, descriptions = nil, {}, {}
for line in csv:gmatch("([^\n]*)\n") do
  local f = split_csv_line(line)
  if not header then
    header = f
  else
    local rec = {}
    for i, name in ipairs(header) do rec[name] = f[i] end
    totals[rec.category] = (totals[rec.category] or 0) + tonumber(rec.amount)
    descriptions[#descriptions + 1] = rec.description
  end
end
return {columns = header, totals = totals, descriptions = descriptions}
