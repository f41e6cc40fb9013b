-- six nested byte comparisons, each on its own line
function fuzz(data)
  local b = {data:byte(1, 6)}
  if b[1] == 0x6d then
    if b[2] == 0x6f then
      if b[3] == 0x6f then
        if b[4] == 0x6e then
          if b[5] == 0x21 then
            if b[6] == 0x3f then
              error("the bug behind six comparisons")
            end
          end
        end
      end
    end
  end
end
