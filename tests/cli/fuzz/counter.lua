-- Isolation: the top level sets the counter once; every input must see it fresh.
counter = 0
local seen = {}
function fuzz(data)
  counter = counter + 1
  seen[#seen + 1] = data
  if counter ~= 1 or #seen ~= 1 then
    error(("state leaked between inputs: counter %d, %d inputs seen"):format(counter, #seen))
  end
end
