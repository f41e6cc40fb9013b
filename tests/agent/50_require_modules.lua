-- Agent task: a model requires the modules it uses, and probes for an optional one.
-- stock: skip (json and cjson are moonbox built-ins)
-- expect-value: {"encoded":"{\"upper\":\"OK\"}","lfs":false,"lfs_msg":true,"lists_places":true,"same_json":true,"same_string":true,"socket":false}
local json = require("json")
local cjson = require("cjson")
local str = require("string")
local tbl = require("table")
local has_lfs, err = pcall(require, "lfs")
local ok_socket, err_socket = pcall(require, "socket.http")
return {
  same_json = json == cjson,
  same_string = str == string and tbl == table,
  lfs = has_lfs,
  lfs_msg = err:match("module 'lfs' not found:") ~= nil,
  lists_places = err:find("no file './lfs.lua'", 1, true) ~= nil,
  socket = ok_socket,
  encoded = cjson.encode({upper = str.upper("ok")}),
}
