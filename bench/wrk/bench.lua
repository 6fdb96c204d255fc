-- wrk script of bench/run.
--
-- With BENCH_REQS set (a Lua file written by `bench.py gen-reqs`): POSTs the pre-signed
-- requests, one per job, round-robin (each thread starts at its own offset). Without it:
-- the plain request of the command line (GET, with the -H headers).
--
-- Counts statuses per class in the `response` hook and prints, at the end, one line
-- `BENCH_JSON {...}` with requests, duration, status mix, errors and latency percentiles
-- (in ms), which bench.py reads.

local threads = {}
local spec = nil
local reqfile = os.getenv("BENCH_REQS")
if reqfile and reqfile ~= "" then
  spec = dofile(reqfile)
end

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

local reqs = {}
local n = 0
local idx = 0
s2xx, s3xx, s4xx, s5xx = 0, 0, 0, 0

function init(args)
  if spec then
    for i, item in ipairs(spec.items) do
      local headers = { ["Content-Type"] = "application/json" }
      headers[spec.header] = item.sig
      reqs[i] = wrk.format("POST", item.path, headers, item.body)
    end
    n = #reqs
    idx = (id or 0) * 7 % n
  end
end

if spec then
  function request()
    idx = idx % n + 1
    return reqs[idx]
  end
end

function response(status, headers, body)
  if status < 300 then
    s2xx = s2xx + 1
  elseif status < 400 then
    s3xx = s3xx + 1
  elseif status < 500 then
    s4xx = s4xx + 1
  else
    s5xx = s5xx + 1
  end
end

function done(summary, latency, requests)
  local c2, c3, c4, c5 = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    c2 = c2 + t:get("s2xx")
    c3 = c3 + t:get("s3xx")
    c4 = c4 + t:get("s4xx")
    c5 = c5 + t:get("s5xx")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"s2xx":%d,"s3xx":%d,"s4xx":%d,"s5xx":%d,' ..
    '"errors":%d,"err_connect":%d,"err_read":%d,"err_write":%d,"err_timeout":%d,' ..
    '"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f}\n',
    summary.requests, summary.duration, summary.bytes, c2, c3, c4, c5,
    e.connect + e.read + e.write + e.timeout, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, latency.mean / 1000))
end
