-- A magic 8-byte string compared with == (invisible to any hook): found through the
-- dictionary of the target's constants.
function fuzz(data)
  if data:sub(1, 8) == "M00nB0x!" then
    error("the magic string")
  end
end
