-- The luv driver: a client driven by a libuv loop (poll handle + timer).
local uv = require("luv")
local simba = require("simba")
local driver = require("simba.luv")
local H = require("helper")

local URL = os.getenv("SIMBA_TEST_REDIS_URL")
if not URL or URL == "" then URL = "memory://" .. H.RUN .. "-luv" end

-- Run the loop until pred() holds or ms passed; true if pred held.
local function run_until(ms, pred)
  local deadline = uv.now() + ms
  local guard = uv.new_timer()
  guard:start(5, 5, function()
    if pred() or uv.now() >= deadline then uv.stop() end
  end)
  uv.run()
  guard:stop()
  guard:close()
  return pred()
end

describe("simba.luv on " .. URL:match("^%a+"), function()
  -- drivers and clients of a test: detached and closed even when it fails, so
  -- no luv handle outlives its client
  local live = {}
  local function attach(c, opts)
    opts = opts or {}
    opts.uv = uv
    local d = driver.attach(c, opts)
    live[#live + 1] = {d, c}
    return d
  end
  after_each(function()
    for _, dc in ipairs(live) do
      dc[1]:detach()
      pcall(dc[2].close, dc[2])
    end
    live = {}
    uv.run("nowait")
  end)

  it("keeps a session live and runs an election's callbacks inside the loop", function()
    local a = H.open(URL)
    local b = H.open(URL)
    local da = attach(a)
    local db = attach(b)
    local ra, rb = H.recorder(), H.recorder()
    local name = H.name("luv.elect")
    local inside = 0
    local ea = a:election(name, {
      on_elected = function(t) inside = inside + 1; ra.listener.on_elected(t) end,
      on_revoked = ra.listener.on_revoked})
    assert.is_true(run_until(H.LONG, function() return ra.elected == 1 end))
    local eb = b:election(name, rb.listener)
    -- for several leases nothing changes, with no other driver than luv
    run_until(3 * H.LEASE, function() return false end)
    assert.equals("LIVE", a:status())
    assert.equals("LIVE", b:status())
    assert.equals(1, ra.elected)
    assert.equals(0, rb.elected)
    assert.is_true(ra.term:valid())
    -- stop from a luv timer: the handover completes inside the loop
    local done
    local t = uv.new_timer()
    t:start(10, 0, function() ea:stop(function(ok) done = ok end) end)
    assert.is_true(run_until(H.LONG, function() return done and rb.elected == 1 end))
    t:close()
    assert.equals("ER", ra.str())
    assert.is_true(rb.terms[1]:token() > ra.terms[1]:token())
    -- a lock acquired asynchronously from the loop
    local got
    assert.is_true(a:lock_async(H.name("luv.lock"), H.LONG, function(term) got = term end))
    assert.is_true(run_until(H.LONG, function() return got ~= nil end))
    assert.is_true(got:valid())
    got:release()
    eb:stop()
    assert.is_true(run_until(H.LONG, function() return rb.revoked == 1 end))
    da:detach()
    db:close()
    assert.is_true(b:is_closed())
    a:close()
    uv.run("nowait") -- let the closed handles go
  end)

  it("runs leader work as coroutines inside the loop", function()
    local a = H.open(URL)
    attach(a)
    local steps, exited = 0, false
    local task = a:run_while_leader(H.name("luv.work"), function(term)
      local _ <close> = setmetatable({}, {__close = function() exited = true end})
      while true do
        assert(term:valid())
        steps = steps + 1
        simba.sleep(10)
      end
    end)
    assert.is_true(run_until(H.LONG, function() return steps >= 5 end))
    local done
    task:stop(function(ok) done = ok end)
    assert.is_true(run_until(H.LONG, function() return done end))
    assert.is_true(exited)
    task:close()
  end)

  it("stops the loop with a callback's error and re-raises it from run", function()
    local a = H.open(URL)
    local d = attach(a)
    local e = a:election(H.name("luv.error"), {on_elected = function() error("luv boom") end})
    local guard = uv.new_timer()
    guard:start(H.LONG, 0, function() uv.stop() end)
    local ok, err = pcall(d.run, d)
    guard:close()
    assert.is_false(ok)
    assert.matches("luv boom", err)
    -- an on_error handler receives errors instead
    local seen
    d:detach()
    local d2 = attach(a, {on_error = function(err2) seen = err2 end})
    local e2 = a:election(H.name("luv.error2"), {on_elected = function() error("second") end})
    assert.is_true(run_until(H.LONG, function() return seen ~= nil end))
    assert.matches("second", seen)
    e:close()
    e2:close()
    d2:close()
    uv.run("nowait")
  end)

  it("waits for a lock in a coroutine without stalling the loop", function()
    local a = H.open(URL)
    local b = H.open(URL)
    local da = attach(a)
    local db = attach(b)
    local name = H.name("luv.colock")
    assert.has_error(function() db:lock(name, 100) end) -- not in a coroutine: misuse
    local held, log = nil, {}
    da:spawn(function()
      held = assert(da:lock(name, H.LONG))
      log[#log + 1] = "a:locked"
    end)
    assert.is_true(run_until(H.LONG, function() return held ~= nil end))
    -- b waits in a coroutine while a holds the lock; meanwhile the loop runs
    -- luv timers and keeps both sessions live
    local ticks, got, timed_out = 0, nil, nil
    local ticker = uv.new_timer()
    ticker:start(10, 10, function() ticks = ticks + 1 end)
    db:spawn(function()
      timed_out = {db:lock(name, 200)} -- a holds it: times out
      log[#log + 1] = "b:timed_out"
      local term, msg, code = db:lock(name, H.LONG)
      assert(term, msg)
      got = term
      log[#log + 1] = "b:locked"
    end)
    assert.is_nil(timed_out) -- the coroutine is waiting, not blocking the caller
    run_until(2 * H.LEASE, function() return false end)
    assert.same({nil, "ETIMEDOUT"}, {timed_out[1], timed_out[3]})
    assert.is_string(timed_out[2])
    assert.is_nil(got)
    assert.is_true(ticks >= 10, "the loop was stalled: " .. ticks .. " ticks")
    assert.equals("LIVE", a:status())
    assert.is_true(held:valid())
    -- a releases from a luv timer: b's waiting coroutine gets the lock
    local held_token = held:token()
    local rel = uv.new_timer()
    rel:start(20, 0, function() rel:close(); held:release() end)
    assert.is_true(run_until(H.LONG, function() return got ~= nil end))
    ticker:stop()
    ticker:close()
    assert.same({"a:locked", "b:timed_out", "b:locked"}, log)
    assert.is_true(got:valid())
    assert.is_true(got:token() > held_token)
    got:release()
    -- await and sleep: an election's stop awaited in a coroutine
    local r = H.recorder()
    local e = a:election(H.name("luv.await"), r.listener)
    local stopped
    da:spawn(function()
      while r.elected == 0 do da:sleep(10) end
      stopped = {da:await(function(done) return e:stop(done) end)}
    end)
    assert.is_true(run_until(H.LONG, function() return stopped ~= nil end))
    assert.same({true}, stopped)
    assert.equals("ER", r.str())
    -- an error in a spawned coroutine stops the loop; run() re-raises it
    da:spawn(function() da:sleep(5); error("spawned boom") end)
    local guard = uv.new_timer()
    guard:start(H.LONG, 0, function() uv.stop() end)
    local ok, err = pcall(da.run, da)
    guard:close()
    assert.is_false(ok)
    assert.matches("spawned boom", err)
    assert.matches("traceback", err) -- the coroutine's, not the loop's
    -- an error object stays as it is
    local obj = {code = 42}
    da:spawn(function() da:sleep(5); error(obj) end)
    guard = uv.new_timer()
    guard:start(H.LONG, 0, function() uv.stop() end)
    ok, err = pcall(da.run, da)
    guard:close()
    assert.is_false(ok)
    assert.equals(obj, err)
    e:close()
  end)

  it("awaits close_async of an election, a lock term and an observer inside the loop", function()
    local a = H.open(URL)
    local d = attach(a)
    local r = H.recorder()
    local name = H.name("luv.close_async")
    local e = a:election(name, r.listener)
    local log, finished = {}, false
    d:spawn(function()
      while r.elected == 0 do d:sleep(5) end
      local ok = d:await(function(done) return e:close_async(done) end)
      log[#log + 1] = ok and "e" or "?"
      local t = assert(d:lock(name, H.LONG)) -- the close released the name
      t:on_revoked(function() log[#log + 1] = "R" end)
      ok = d:await(function(done) return t:close_async(done) end)
      log[#log + 1] = ok and "t" or "?"
      local ob
      ob = a:observe(name, function()
        if not ob:is_closed() then
          ob:close_async(function() log[#log + 1] = "o"; finished = true end)
        end
      end, 20)
    end)
    assert.is_true(run_until(H.LONG, function() return finished end))
    assert.equals("eRto", table.concat(log))
    assert.equals("E", r.str()) -- close_async detaches the listener
  end)

  it("detaches when a callback closes the client", function()
    local a = H.open(URL)
    local closed
    local d = attach(a, {on_close = function() closed = true end})
    local e = a:election(H.name("luv.close"), {on_elected = function() a:close() end})
    assert.is_true(run_until(H.LONG, function() return closed end))
    assert.is_true(a:is_closed())
    assert.is_false(d.active)
    e:close()
    uv.run("nowait")
  end)
end)
