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
