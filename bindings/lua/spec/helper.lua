-- Shared helpers of the Lua binding's specs.
local simba = require("simba")

local H = {}

H.LEASE = 900 -- ms: short, so tests are fast (renew = lease / 3)
H.LONG = 15000 -- ms: a generous bound for anything that should happen "soon"

-- A run id so that names never collide with another run on a shared server.
math.randomseed(os.time() + simba.now_ms())
H.RUN = string.format("lua%d%04d", os.time() % 100000, math.random(0, 9999))

local ENV = {
  redis = "SIMBA_TEST_REDIS_URL",
  postgres = "SIMBA_TEST_POSTGRES_URL",
  zookeeper = "SIMBA_TEST_ZOOKEEPER_URL",
}

-- The backend URL of this run (SIMBA_LUA_BACKEND, default memory), or nil and
-- the reason it is skipped.
function H.backend()
  local b = os.getenv("SIMBA_LUA_BACKEND") or "memory"
  if b == "memory" then return "memory://" .. H.RUN, b end
  local var = ENV[b]
  if not var then error("unknown SIMBA_LUA_BACKEND " .. b) end
  local url = os.getenv(var)
  if not url or url == "" then return nil, b, var .. " is unset: " .. b .. " skipped" end
  return url, b
end

function H.name(s) return H.RUN .. "." .. s end

function H.open(url, opts)
  opts = opts or {}
  if opts.lease == nil then opts.lease = H.LEASE end
  local c, msg, code = simba.open(url, opts)
  assert(c, "open failed: " .. tostring(msg) .. " " .. tostring(code))
  return c
end

function H.open_live(url, opts)
  local c = H.open(url, opts)
  assert(c:wait_live(H.LONG))
  return c
end

-- Drive every client until pred() holds (true) or ms passed (false).
function H.drive(clients, ms, pred)
  local deadline = simba.now_ms() + ms
  while true do
    if pred and pred() then return true end
    if simba.now_ms() >= deadline then return false end
    for _, c in ipairs(clients) do
      if not c:is_closed() then
        local ok, msg = c:run(2)
        if ok == nil then error("run failed: " .. tostring(msg), 2) end
      end
    end
  end
end

-- A recording election listener: log of "E<token>" / "R<reason>" entries.
function H.recorder()
  local r = {log = {}, elected = 0, revoked = 0, terms = {}, reasons = {}}
  r.listener = {
    on_elected = function(t)
      r.elected = r.elected + 1
      r.terms[#r.terms + 1] = t
      r.log[#r.log + 1] = "E"
      r.term = t
    end,
    on_revoked = function(t, reason)
      r.revoked = r.revoked + 1
      r.reasons[#r.reasons + 1] = reason
      r.log[#r.log + 1] = "R"
      assert(r.term == t, "on_revoked for another term than the last elected")
      r.term = nil
    end,
  }
  function r.str() return table.concat(r.log) end
  return r
end

-- Start an election on client c and drive c until it leads: the election,
-- its recorder and the term.
function H.leader(c, name)
  local r = H.recorder()
  local e = c:election(name, r.listener)
  assert(H.drive({c}, H.LONG, function() return r.elected == 1 end), "not elected")
  return e, r, r.terms[1]
end

-- Call call(...) from a callback or leader work that start(fn) starts on
-- client c (fn gets the callback's arguments); it must raise EWOULDBLOCK:
-- a blocking call there would wait for itself. The handle is closed.
function H.would_block(c, start, call)
  local seen
  local h = start(function(...) seen = {pcall(call, ...)} end)
  assert(H.drive({c}, H.LONG, function() return seen ~= nil end), "the callback did not run")
  assert(seen[1] == false, "the call did not raise")
  assert(tostring(seen[2]):find("EWOULDBLOCK", 1, true), tostring(seen[2]))
  h:close()
end

return H
