-- Floor of lua/gcra.lua: its Redis commands on a cost-1 allow (TIME, GET of
-- the theoretical arrival time, SET of the new one with PXAT) and the
-- contract's reply, with no option checks and no arithmetic.
local time = redis.call('TIME')
redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], time[1], 'PXAT', time[1] * 1000 + ARGV[2] * 1000)
return {'allow', {ARGV[3], ARGV[2], ARGV[1]}}
