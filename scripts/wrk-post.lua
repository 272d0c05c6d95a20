-- npm run bench:client: wrk sends the same POST as our client does.
wrk.method = "POST"
wrk.body = '{"prompt":"x"}'
wrk.headers["Content-Type"] = "application/json"
