-- A magic word only string.find sees: its compare hint hands the word to libFuzzer.
function fuzz(data)
  if data:find("Xyzzy-42", 1, true) then
    error("found the magic word")
  end
end
