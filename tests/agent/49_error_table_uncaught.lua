-- Agent task: the model raises a structured error and does not catch it.
-- expect-status: runtime_error
-- expect-error: (error object is a table value)
-- expect-stdout: starting\n
print("starting")
local function fetch(id)
  if id > 2 then error({code = 404, message = "no such id " .. id}) end
  return {id = id}
end
for id = 1, 5 do fetch(id) end
