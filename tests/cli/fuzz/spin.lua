-- Inputs starting with "!" loop for ever: an instruction-limit trip, a finding only when asked.
function fuzz(data)
  if data:sub(1, 1) == "!" then
    while true do end
  end
end
