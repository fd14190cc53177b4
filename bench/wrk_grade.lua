-- POST /v1/grade load for wrk: answers cycle through a file (one per line). Nothing in the
-- service caches answers, so repeating the file's answers costs what new ones would.
-- Environment: ANSWERS (file), QID (bank question id), KEY (API key). Prints one summary line.
local answers = {}
for line in io.lines(os.getenv("ANSWERS")) do answers[#answers + 1] = line end
local qid, key = os.getenv("QID"), os.getenv("KEY")
local threads = {}
local counter = 0

local function escape(s)
  return (s:gsub('\\', '\\\\'):gsub('"', '\\"'))
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  ok, overloaded, other = 0, 0, 0
end

function request()
  counter = counter + 1
  local answer = answers[(counter % #answers) + 1]
  local body = '{"question_id":"' .. qid .. '","answer":"' .. escape(answer) .. '"}'
  return wrk.format("POST", "/v1/grade", {["Content-Type"] = "application/json", ["X-API-Key"] = key}, body)
end

function response(status, headers, body)
  if status == 200 then
    ok = ok + 1
  elseif status == 503 and headers["Retry-After"] then
    overloaded = overloaded + 1
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local n_ok, n_503, n_other = 0, 0, 0
  for _, t in ipairs(threads) do
    n_ok = n_ok + t:get("ok")
    n_503 = n_503 + t:get("overloaded")
    n_other = n_other + t:get("other")
  end
  local socket = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT ok=%d overloaded=%d other=%d socket_errors=%d seconds=%.3f p50_ms=%.3f p99_ms=%.3f\n",
    n_ok, n_503, n_other, socket, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
