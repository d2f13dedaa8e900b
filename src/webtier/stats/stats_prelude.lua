-- Shared by the statistics scripts that write a record (stats_record.lua,
-- stats_merge.lua): Script.load puts this file before each of them, so the
-- period and the rules of a new record exist once.

-- The start of the period the server's clock is in: the server alone
-- decides it, so app servers whose clocks disagree cannot split or flip one.
local function server_period(period)
  local now = tonumber(redis.call('TIME')[1])
  return now - now % period
end

-- After the first write of a record's period: its key expires by itself
-- once `keep` newer periods have passed, and (ranked types, `contexts`
-- given) the context is listed once per period, up to `cap`: the listing is
-- what rankings read, and the cap bounds it whatever names callers invent.
local function created(key, start, period, keep, contexts, context, cap)
  local expire_at = (start + (keep + 1) * period) * 1000
  redis.call('PEXPIREAT', key, expire_at)
  if contexts and redis.call('SCARD', contexts) < cap then
    redis.call('SADD', contexts, context)
    redis.call('PEXPIREAT', contexts, expire_at)
  end
end
