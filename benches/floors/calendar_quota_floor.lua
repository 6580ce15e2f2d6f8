-- Floor of lua/calendar_quota.lua: its Redis commands on a cost-1 allow (TIME,
-- GET of the period's count, SET of the new one with PXAT at the period's end)
-- and the contract's reply, with no option checks and no date arithmetic.
local time = redis.call('TIME')
redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], time[1], 'PXAT', time[1] * 1000 + 86400000)
return {'allow', {ARGV[1], '86400', ARGV[1]}}
