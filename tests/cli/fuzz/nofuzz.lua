-- Defines no fuzz function.
x = 1
