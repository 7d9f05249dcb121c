-- NOW, Redis's clock in µs, from TIME.

local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
