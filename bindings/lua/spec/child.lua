-- The second process of handover_spec.lua:
--   lua5.4 child.lua URL NAME STATUS_FILE MODE HOLD_MS LEASE_MS
-- Contends for NAME; once elected it writes "ELECTED <token>" to STATUS_FILE,
-- holds the lease HOLD_MS while driving its loop, then either stops cleanly
-- (MODE "stop": writes "STOPPING", stops, writes "STOPPED" after the stop
-- completed, closes, exits 0) or
-- dies without closing anything (MODE "crash": writes "CRASH", exits 3 at once).
local simba = require("simba")
local url, name, status, mode, hold, lease = arg[1], arg[2], arg[3], arg[4], tonumber(arg[5]), tonumber(arg[6])

local function say(line)
  local f = assert(io.open(status, "a"))
  f:write(line, "\n")
  f:close()
end

local c = assert(simba.open(url, {lease = lease, name = "child"}))
local term
local e = c:election(name, {
  on_elected = function(t) term = t; say("ELECTED " .. t:token()) end,
  on_revoked = function(t, reason) say("REVOKED " .. reason) end,
})
assert(c:run(20000, function() return term ~= nil end), "child: not elected")
c:run(hold)
assert(term:valid(), "child: lost its term while holding it")
if mode == "crash" then
  -- the local deadline of the term, on the machine's monotonic clock (the
  -- parent's simba.now_ms() reads the same clock): no other process may lead
  -- before it
  say(string.format("CRASH %d", simba.now_ms() + term:remaining()))
  os.exit(3, false) -- no close, no finalizers: the session must expire
end
-- written before the stop starts: the lease cannot be free before this line
-- (after stop_wait, the parent may already lead before "STOPPED" is written)
say("STOPPING")
assert(e:stop_wait(20000))
say("STOPPED")
c:close()
os.exit(0)
