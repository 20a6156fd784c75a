-- wrk script for bench/page_latency.py: logged-in clients reading My jobs.
-- Arguments (after `--`): think_ms cookie_name session_key...
-- Each request alternates between the page (/jobs/) and its HTMX fragment (/jobs/table/), carries
-- the next session's cookie (round robin over all of them), and each connection waits a random
-- 0..think_ms before its next request (on average two requests per think time, as a person who
-- loads the page and then lets it refresh). done() prints the figures the Python script parses.
local think_ms = 1000
local cookies = {}
local n = 0
local threads = {}
bad = 0          -- per thread: answers other than 200 (read in done() through thread:get)
redirected = 0   -- per thread: 200 + HX-Redirect (the session was gone: not a page served)

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  think_ms = tonumber(args[1])
  for j = 3, #args do
    cookies[#cookies + 1] = args[2] .. "=" .. args[j]
  end
  math.randomseed(os.time() + #cookies + (tonumber(tostring({}):sub(8), 16) or 0))
end

function request()
  n = n + 1
  local cookie = cookies[(n % #cookies) + 1]
  if n % 2 == 1 then
    return wrk.format("GET", "/jobs/", { ["Cookie"] = cookie })
  end
  return wrk.format("GET", "/jobs/table/", { ["Cookie"] = cookie, ["HX-Request"] = "true" })
end

function response(status, headers, body)
  if status ~= 200 then
    bad = bad + 1
  elseif headers["HX-Redirect"] then
    redirected = redirected + 1
  end
end

function delay()
  return math.random(0, think_ms)
end

function done(summary, latency, requests)
  local not_ok, hx = 0, 0
  for _, thread in ipairs(threads) do
    not_ok = not_ok + thread:get("bad")
    hx = hx + thread:get("redirected")
  end
  io.write(string.format("WRK not_200=%d hx_redirect=%d requests=%d non2xx3xx=%d connect_errors=%d read_errors=%d write_errors=%d timeouts=%d "
    .. "p50_us=%d p95_us=%d p99_us=%d max_us=%d\n",
    not_ok, hx, summary.requests, summary.errors.status, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.timeout, latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max))
end
