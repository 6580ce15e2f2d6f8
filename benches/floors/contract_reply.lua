-- Floor: the reply every built-in sends, {"allow", {limit, reset, remaining}},
-- and nothing else. Under the script contract no limiter can be cheaper; its
-- ratio to `return 1` is the ceiling of every built-in's.
return {'allow', {ARGV[1], ARGV[2], ARGV[1]}}
