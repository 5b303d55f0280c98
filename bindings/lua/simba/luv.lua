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
