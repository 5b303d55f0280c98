-- LuaRocks package of the Lua binding. It builds the C module against an
-- installed libsimba (headers and libsimba.so.1, e.g. from `cmake --install`):
--   luarocks make simba-1.5.0-1.rockspec SIMBA_DIR=/usr/local
-- or SIMBA_INCDIR=... SIMBA_LIBDIR=... when they are not under one prefix.
rockspec_format = "3.0"
package = "simba"
version = "1.5.0-1"
source = {
   url = "git+file:///work/main",
   tag = "v1.5.0",
   dir = "main/bindings/lua",
}
description = {
   summary = "Distributed leases and leader election (libsimba) for Lua 5.4",
   detailed = [[
Leader election, locks with fencing tokens and leader work on Redis,
PostgreSQL, ZooKeeper and memory://, over libsimba's C ABI. Clients run on
the Lua thread (libsimba's external loop mode): drive them with
client:process()/client:run(ms), or from a luv loop with simba.luv.
]],
   license = "MIT",
   labels = { "distributed", "lock", "leader-election", "redis", "zookeeper", "postgresql" },
}
dependencies = {
   "lua >= 5.4, < 5.5",
}
external_dependencies = {
   SIMBA = {
      header = "simba.h",
      library = "simba",
   },
}
build = {
   type = "builtin",
   modules = {
      simba = {
         sources = {
            "src/simba_lua.c", "src/lua_common.c", "src/lua_term.c", "src/lua_loop.c",
            "src/lua_handle.c", "src/lua_election.c", "src/lua_client.c", "src/lua_options.c",
            "src/lua_lock.c", "src/lua_task.c", "src/lua_observe.c",
         },
         incdirs = { "$(SIMBA_INCDIR)" },
         libdirs = { "$(SIMBA_LIBDIR)" },
         libraries = { "simba", "pthread", "dl" },
      },
      ["simba.luv"] = "simba/luv.lua",
   },
}
test_dependencies = { "busted" }
test = {
   type = "busted",
   flags = { "--lua=lua5.4" },
}
