function layer()while true do pcall(layer)
end
end
layer()