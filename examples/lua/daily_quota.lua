-- daily_quota: a quota per client per day, with a JSON-friendly extra reply value.
--
-- KEYS[1]  the client's counter
-- ARGV     {quota, period_s}
-- Reply    {"allow"|"deny", {quota, remaining, {"x-quota-period", period_s}}, used}
--          remaining and the period header go under the limiter's declared names (the pair
--          names its own header); `used` reaches the responder as `Outcome::extra()[0]`.

local quota = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local used = redis.call('INCR', KEYS[1])
if used == 1 then redis.call('EXPIRE', KEYS[1], period) end
local remaining = math.max(quota - used, 0)
local decision = used <= quota and 'allow' or 'deny'
if decision == 'deny' then
  -- A refused request does not use the quota up further.
  redis.call('DECR', KEYS[1])
  used = used - 1
end
return {decision, {ARGV[1], tostring(remaining), {'x-quota-period', ARGV[2]}}, used}
