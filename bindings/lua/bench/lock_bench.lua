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

-- warm up both, then alternate rounds so that drift (the machine's load)
-- affects both alike; report the pooled ratio and the median of the rounds'
-- ratios (robust to a busy moment hitting one round)
local rounds = tonumber(os.getenv("SIMBA_BENCH_ROUNDS") or "8")
lua_cycles(math.max(1, n // 10))
c_cycles(math.max(1, n // 10))
local per = math.max(1, n // rounds)
local lua_ms, c_ms, ratios = 0, 0, {}
for i = 1, rounds do
  local l, k
  if i % 2 == 1 then
    l = lua_cycles(per); k = c_cycles(per)
  else
    k = c_cycles(per); l = lua_cycles(per)
  end
  lua_ms, c_ms = lua_ms + l, c_ms + k
  ratios[#ratios + 1] = l / math.max(k, 1e-9)
end
table.sort(ratios)
local median = rounds % 2 == 1 and ratios[(rounds + 1) // 2]
  or (ratios[rounds // 2] + ratios[rounds // 2 + 1]) / 2
local cycles = per * rounds
local lua_us, c_us = lua_ms * 1000 / cycles, c_ms * 1000 / cycles
print(string.format("backend %s, %d cycles each, %d alternating rounds", url:match("^%a+"), cycles, rounds))
print(string.format("lua binding: %8.1f us/cycle (%d cycles/s)", lua_us, math.floor(1e6 / lua_us)))
print(string.format("raw C      : %8.1f us/cycle (%d cycles/s)", c_us, math.floor(1e6 / c_us)))
print(string.format("ratio lua/C: %.3f pooled, %.3f median of rounds (min %.3f, max %.3f)",
  lua_us / c_us, median, ratios[1], ratios[#ratios]))
c:close()
