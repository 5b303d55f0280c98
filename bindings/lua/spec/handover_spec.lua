-- Two processes contend for one name on a real backend: a clean stop hands
-- the lease over at once, a crash only after the session expired; tokens grow.
local simba = require("simba")
local H = require("helper")

local LUA = os.getenv("SIMBA_LUA_EXE") or "lua5.4"
local HERE = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"

local function read_lines(path)
  local f = io.open(path, "r")
  local t = {}
  if not f then return t end
  for l in f:lines() do t[#t + 1] = l end
  f:close()
  return t
end

local function has(lines, prefix)
  for _, l in ipairs(lines) do
    if l:sub(1, #prefix) == prefix then return l end
  end
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local BACKENDS = {redis = "SIMBA_TEST_REDIS_URL", postgres = "SIMBA_TEST_POSTGRES_URL",
                  zookeeper = "SIMBA_TEST_ZOOKEEPER_URL"}

local any = false
for _, var in pairs(BACKENDS) do
  local v = os.getenv(var)
  if v and v ~= "" then any = true end
end
if not any then
  print("no SIMBA_TEST_{REDIS,POSTGRES,ZOOKEEPER}_URL set: the handover needs a real backend, skipped")
  os.exit(77)
end

for _, backend in ipairs({"redis", "postgres", "zookeeper"}) do
  local url = os.getenv(BACKENDS[backend])
  describe("two-process handover on " .. backend, function()
    if not url or url == "" then
      it("is skipped", function() pending(BACKENDS[backend] .. " is unset: " .. backend .. " skipped") end)
      return
    end

    local function run(mode)
      local name = H.name("handover." .. mode)
      local status = os.tmpname()
      local lease = 1200
      local cmd = table.concat({LUA, q(HERE .. "child.lua"), q(url), q(name), q(status), mode,
                                tostring(2 * lease), tostring(lease)}, " ") .. " 2>&1"
      local child = assert(io.popen(cmd, "r"))
      local c = H.open(url, {lease = lease})
      local events = {}
      local mine, lines
      -- the child becomes leader first
      assert.is_true(H.drive({c}, H.LONG, function()
        lines = read_lines(status)
        return has(lines, "ELECTED") ~= nil
      end), "the child was never elected")
      local child_token = tonumber(has(lines, "ELECTED"):match("%d+"))
      local e = c:election(name, {
        on_elected = function(t)
          lines = read_lines(status)
          -- never leader while the child still holds the lease
          mine = {term = t, child_done = has(lines, "STOPPING") or has(lines, "CRASH"),
                  at = simba.now_ms()}
        end,
        on_revoked = function(t, reason) events[#events + 1] = reason end})
      local ended_at
      assert.is_true(H.drive({c}, 4 * H.LONG, function()
        if not ended_at then
          local l = read_lines(status)
          if has(l, "STOPPING") or has(l, "CRASH") then ended_at = simba.now_ms() end
        end
        return mine ~= nil
      end), "the parent was never elected")
      local out = child:read("a")
      local ok, how, code = child:close()
      local final = read_lines(status) -- what the child wrote, to its exit
      os.remove(status)
      assert.is_truthy(mine.child_done, "elected while the child held the lease; child said: " .. out)
      assert.is_true(mine.term:token() > child_token)
      assert.is_true(mine.term:valid())
      assert.is_true(e:stop_wait(H.LONG))
      assert.same({"STOPPED"}, events)
      c:close()
      return ok, code, mine.at - ended_at, out, final, mine.at
    end

    it("takes over at once after a clean stop", function()
      local ok, code, took, out, l = run("stop")
      assert.is_true(ok, "child failed: " .. out)
      assert.equals(0, code)
      -- the child's stop completed and it saw its own revocation
      assert.is_truthy(has(l, "STOPPED"), table.concat(l, "|"))
      assert.is_truthy(has(l, "REVOKED STOPPED"), table.concat(l, "|"))
      assert.is_true(took < 1200 * 3, "took " .. took .. " ms")
    end)

    it("takes over after the crashed child's session expired", function()
      local ok, code, took, out, l, elected_at = run("crash")
      assert.is_nil(ok)
      assert.equals(3, code, out)
      assert.is_true(took >= 0)
      -- safety: the parent leads only after the crashed child's own term
      -- deadline passed (same monotonic clock, same machine)
      local deadline = tonumber(has(l, "CRASH"):match("%d+"))
      assert.is_true(elected_at >= deadline,
        string.format("elected %d ms before the child's deadline", deadline - elected_at))
    end)
  end)
end
