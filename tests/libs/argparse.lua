-- argparse (Debian's lua-argparse) under moonbox and stock lua5.4: tests/libs/test_libs.sh.
-- packages: lua-argparse
-- luadir: 5.4
local root = assert(arg and arg[1], "usage: lua5.4 SCRIPT.lua /usr/share/lua/5.x")
package.path = root .. "/?.lua;" .. root .. "/?/init.lua"
local check = assert(loadfile("support/check.lua"))(root)

local argparse = require "argparse"

local function build()
  local parser = argparse("backup", "Back files up.", "See the manual for more.")
  parser:argument("source", "What to back up.")
  parser:argument("dest", "Where to."):args("?"):default("/backups")
  parser:option("-l --level", "Compression level.", "6"):convert(tonumber)
  parser:option("-e --exclude", "Patterns to exclude."):count("*")
  parser:option("--mode", "Transfer mode."):choices({"copy", "sync", "move"})
  parser:option("--pair"):args(2)
  parser:flag("-v --verbose", "More output."):count("0-3"):target("verbosity")
  parser:flag("-q --quiet")
  parser:mutex(parser:flag("--fast"), parser:flag("--safe"))
  return parser
end

local function parse(argv)
  return build():pparse(argv)
end

check("minimal", parse, {"src"})
check("all options", parse, {"src", "dst", "-l", "9", "-e", "*.o", "--exclude=*.tmp", "--mode", "sync", "-vv", "-q"})
check("short option joined", parse, {"-l3", "src"})
check("pair", parse, {"--pair", "a", "b", "src"})
check("double dash", parse, {"--", "-notanoption"})
check("verbose count", parse, {"src", "-v", "-v", "-v"})
check("error: missing argument", parse, {})
check("error: unknown option", parse, {"src", "--nope"})
check("error: too many arguments", parse, {"a", "b", "c"})
check("error: bad choice", parse, {"src", "--mode", "zip"})
check("error: missing option value", parse, {"src", "-l"})
check("error: mutex", parse, {"src", "--fast", "--safe"})
check("verbose count capped", parse, {"src", "-vvvv"})
check("error: convert", parse, {"src", "-l", "high"})
check("usage", function() return build():get_usage() end)
check("help", function() return build():get_help() end)

-- Commands.
local function git()
  local p = argparse("git"):command_target("command")
  local commit = p:command("commit ci", "Record changes.")
  commit:option("-m --message"):args(1)
  commit:flag("-a --all")
  local remote = p:command("remote")
  remote:command("add"):argument("name")
  remote:command("remove rm"):argument("name")
  p:require_command(true)
  return p
end
check("command", function() return git():pparse({"commit", "-am", "msg"}) end)
check("command alias", function() return git():pparse({"ci", "--message", "x"}) end)
check("nested command", function() return git():pparse({"remote", "rm", "origin"}) end)
check("error: no command", function() return git():pparse({}) end)
check("error: unknown command", function() return git():pparse({"push"}) end)
check("command help", function() return git():get_help() end)

-- Actions, defaults, callbacks.
check("action", function()
  local seen = {}
  local p = argparse("p")
  p:option("-I"):count("*"):action(function(res, target, value) seen[#seen + 1] = value; res[target] = #seen end)
  p:flag("--stop"):action(function() seen[#seen + 1] = "stop" end)
  local ok, res = p:pparse({"-I", "a", "-Ib", "--stop"})
  return ok, res, seen
end)
check("action error", function()
  local p = argparse("p")
  p:option("--n"):convert(function(v) if v ~= "1" then return nil, "must be one" end return 1 end)
  return p:pparse({"--n", "2"})
end)
-- pparse rethrows a callback's error with debug.traceback's text appended: only the message is
-- compared, the traceback's format is moonbox's own (docs/compat.md, "`debug`").
check("callback raising", function()
  local p = argparse("p")
  p:flag("--boom"):action(function() error("boom!", 0) end)
  local ok, err = pcall(p.pparse, p, {"--boom"})
  return ok, err:match("^[^\n]*"), err:find("\noriginal stack traceback:\n", 1, true) ~= nil
end)
check("defaults", function()
  local p = argparse("p")
  p:option("-o"):default("out.txt"):defmode("arg")
  p:option("--many"):args("*"):default("d")
  return p:pparse({"-o"})
end)
check("hidden and help_max_width", function()
  local p = argparse("p"):help_max_width(40)
  p:option("--secret"):hidden(true)
  p:option("--visible", "A visible option with a rather long description that wraps.")
  return p:get_help()
end)
check("epilog and usage margin", function()
  local p = argparse("prog"):epilog("Bye."):usage_margin(2)
  p:argument("files"):args("+")
  return p:get_help()
end)
check("help flag", function()
  local p = argparse("p"):add_help(false)
  p:flag("-h", "Custom help.")
  return p:pparse({"-h"})
end)
check("bad definition", function() return pcall(function() argparse("p"):option("bad name with spaces and no dash") end) end)
