-- Runs busted inside this lua5.4 process (busted's Lua 5.4 modules from
-- Debian's lua-busted), so that a spec's exit code (77: skipped) reaches ctest:
--   lua5.4 spec/run.lua [busted options] spec/simba_spec.lua
require("busted.runner")({standalone = false})
