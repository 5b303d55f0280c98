--- simba.luv: drive a simba client from a luv (libuv) event loop.
--
--   local uv = require("luv")
--   local simba = require("simba")
--   local driver = require("simba.luv")
--   local client = assert(simba.open(url, {lease = 3000}))
--   local d = driver.attach(client, {uv = uv})
--   ... uv.run() ...
--   d:detach()        -- or client:close(): the driver detaches itself
--
-- The client's fd is watched with a poll handle (readable: process), and a
-- timer fires when client:timeout() elapses. Every callback of the client runs
-- inside those handles, on the loop's (Lua) thread.
local M = {}

local Driver = {}
Driver.__index = Driver

--- Attach @p client to a luv loop.
-- opts.uv: the luv module (default require("luv"));
-- opts.on_error(err): called with an error raised by a callback of the client
--   (or a failure of process()). Without it the driver keeps the first error in
--   d.error and stops the loop (uv.stop()): d:run() then re-raises it. (An error
--   escaping a luv callback would make luv exit the process.)
-- opts.on_close(): called once the client closed (for instance by a close()
--   started inside a callback), after the driver detached.
function M.attach(client, opts)
  opts = opts or {}
  local uv = opts.uv or require("luv")
  assert(type(client) == "userdata", "simba.luv.attach: a simba client expected")
  local d = setmetatable({client = client, uv = uv, active = true,
                          on_error = opts.on_error, on_close = opts.on_close}, Driver)
  d.poll = uv.new_poll(client:fd())
  d.timer = uv.new_timer()
  local function tick()
    if not d.active then return end
    if client:is_closed() then
      d:detach()
      if d.on_close then d.on_close() end
      return
    end
    local ok, res, msg, code = pcall(client.process, client)
    if not ok then
      d:_fail(res)
    elseif res == nil then
      if code == "ECLOSED" then
        -- A close started in a callback has completed: finish it here.
        client:close()
        d:detach()
        if d.on_close then d.on_close() end
        return
      end
      d:_fail(msg)
    end
    d:_arm()
  end
  d.tick = tick
  d.poll:start("r", tick)
  d.timer:start(0, 0, tick)
  return d
end

function Driver:_fail(err)
  if self.on_error then
    local ok, e = pcall(self.on_error, err)
    if ok then return end
    err = e
  end
  if self.error == nil then self.error = err end
  self.uv.stop()
end

--- uv.run(mode) (default "default"), then re-raise the first error a callback
-- of the client raised meanwhile (when no opts.on_error was given).
function Driver:run(mode)
  local r = self.uv.run(mode)
  if self.error ~= nil then
    local e = self.error
    self.error = nil
    error(e, 0)
  end
  return r
end

function Driver:_arm()
  if not self.active then return end
  if self.client:is_closed() then
    self.timer:stop()
    self.timer:start(0, 0, self.tick)
    return
  end
  local to = self.client:timeout()
  -- a close started in a callback completes without waking the fd: poll it
  if self.client:is_closing() and (to < 0 or to > 10) then to = 10 end
  self.timer:stop()
  if to >= 0 then self.timer:start(to, 0, self.tick) end
end

-- Coroutines on the loop. A blocking call (client:lock(), wait_live(),
-- stop_wait()) drives only its own client and stalls the whole luv loop while
-- it waits; inside a coroutine started with d:spawn(), d:lock(), d:await() and
-- d:sleep() wait by yielding instead, and the loop goes on.

--- Start fn(...) as a coroutine on the loop (it runs at once, until its first
-- wait). An error it raises is handled like a callback's error (opts.on_error,
-- or the loop stops and d:run() re-raises it). Returns the coroutine.
function Driver:spawn(fn, ...)
  assert(type(fn) == "function", "simba.luv: spawn(fn, ...) expects a function")
  local co = coroutine.create(fn)
  self:_resume(co, ...)
  return co
end

function Driver:_resume(co, ...)
  local ok, err = coroutine.resume(co, ...)
  if not ok then
    -- a message gets the coroutine's traceback; an error object stays as it is
    if type(err) == "string" then err = debug.traceback(co, err) end
    self:_fail(err)
  end
end

-- Resume co on a zero timer: never inside the library's callback (whose frame
-- is libsimba's), always from the loop itself.
function Driver:_resume_soon(co)
  local t = self.uv.new_timer()
  t:start(0, 0, function()
    t:close()
    self:_resume(co)
  end)
end

local function current_coroutine(what)
  local co, main = coroutine.running()
  if main then error("simba.luv: " .. what .. " must be called from a coroutine (d:spawn)", 3) end
  return co
end

--- Inside a coroutine: start(done) starts an asynchronous operation whose
-- completion calls done(...); await yields until it did and returns done's
-- arguments. When start itself returns nil, msg, code (the operation did not
-- start, so done will not run), await returns those.
-- Example: local ok, code = d:await(function(done) election:stop(done) end)
function Driver:await(start)
  local co = current_coroutine("await")
  local results, waiting = nil, false
  local r = table.pack(start(function(...)
    if results ~= nil then return end -- a completion runs once
    results = table.pack(...)
    if waiting then self:_resume_soon(co) end
  end))
  if results == nil and r.n >= 1 and r[1] == nil then
    return nil, r[2], r[3]
  end
  while results == nil do
    waiting = true
    coroutine.yield()
  end
  return table.unpack(results, 1, results.n)
end

--- Inside a coroutine: client:lock(name, timeout_ms) without stalling the
-- loop. Returns the term, or nil, msg, code ("ETIMEDOUT", "ECANCELED" when the
-- client closed, ...). timeout_ms is required (negative: without bound).
function Driver:lock(name, timeout_ms)
  assert(math.type(timeout_ms) == "integer", "simba.luv: lock(name, timeout_ms): integer timeout expected")
  return self:await(function(done) return self.client:lock_async(name, timeout_ms, done) end)
end

--- Inside a coroutine: sleep ms milliseconds, the loop going on.
function Driver:sleep(ms)
  local co = current_coroutine("sleep")
  local t = self.uv.new_timer()
  t:start(ms, 0, function()
    t:close()
    self:_resume(co)
  end)
  coroutine.yield()
end

--- Stop watching the client (it is not closed). Idempotent.
function Driver:detach()
  if not self.active then return end
  self.active = false
  self.poll:stop()
  self.timer:stop()
  if not self.poll:is_closing() then self.poll:close() end
  if not self.timer:is_closing() then self.timer:close() end
end

--- Detach and close the client.
function Driver:close()
  self:detach()
  return self.client:close()
end

Driver.__close = Driver.close

M.Driver = Driver
return M
