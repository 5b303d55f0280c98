-- Lock cycle benchmark (acquire + release) of the Lua binding against the raw
-- C cycle (simba_lock_acquire + simba_lock_release in a C loop inside the
-- module), same process, same client, same run.
--   lua5.4 bench/lock_bench.lua [URL] [CYCLES]
-- URL defaults to $SIMBA_TEST_REDIS_URL. Not part of ctest.
local simba = require("simba")
local url = (arg[1] and arg[1] ~= "") and arg[1] or os.getenv("SIMBA_TEST_REDIS_URL")
local n = tonumber(arg[2] or "2000")
assert(url and url ~= "", "usage: lock_bench.lua URL [CYCLES] (or set SIMBA_TEST_REDIS_URL)")

local c = assert(simba.open(url, {lease = 5000}))
assert(c:wait_live(10000))
local name = "lua-bench." .. os.time()

local function lua_cycles(k)
  local t0 = simba.now_ms()
  for _ = 1, k do
    local t = assert(c:lock(name, 10000))
    assert(t:release())
  end
  return simba.now_ms() - t0
end

local function c_cycles(k) return assert(c:_bench_c_cycle(name, k)) end

-- warm up both, then alternate rounds so that drift affects both alike
lua_cycles(math.max(1, n // 10))
c_cycles(math.max(1, n // 10))
local lua_ms, c_ms = 0, 0
for _ = 1, 4 do
  lua_ms = lua_ms + lua_cycles(n // 4)
  c_ms = c_ms + c_cycles(n // 4)
end
local cycles = (n // 4) * 4
local lua_us, c_us = lua_ms * 1000 / cycles, c_ms * 1000 / cycles
print(string.format("backend %s, %d cycles each", url:match("^%a+"), cycles))
print(string.format("lua binding: %8.1f us/cycle (%d cycles/s)", lua_us, math.floor(1e6 / lua_us)))
print(string.format("raw C      : %8.1f us/cycle (%d cycles/s)", c_us, math.floor(1e6 / c_us)))
print(string.format("ratio lua/C: %.3f", lua_us / c_us))
c:close()
