"""A runner-protocol session on file: record one, or answer the harness from one. For running a runner
where the harness cannot run (a lent machine with transformers but no Node): record the requests the
harness sends here, replay them to the runner there (scripts/device/hf_oracle_check.py writes the
same file with the real runner's answers), and score those answers here with `bench run` as usual.

  record  python3 recorded_session.py record SESSION.jsonl -- RUNNER COMMAND...
          runs the runner, passes every line through, and writes the hello and each request with
          its answer to SESSION.jsonl (one JSON object a line: {"hello": ...}, then
          {"request": {"method", "params"}, "answer": {"result"} or {"error"}}).
  replay  python3 recorded_session.py replay SESSION.jsonl
          answers with the recorded hello, then each request with the answer recorded for the same
          method and params (the n-th time a request comes, the n-th recorded answer, so a runner
          that answered the same request differently stays caught). A request that was never
          recorded is answered with an error naming it: a replay never makes up an answer.
"""
import json
import subprocess
import sys
import threading

from bench_runner import refuse, requests, send


def request_key(method, params):
    return json.dumps([method, params], sort_keys=True, separators=(",", ":"))


def read_session(path):
    """(hello, {request key: [answers in order]}) of a session file."""
    hello, answers = None, {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            entry = json.loads(line)
            if "hello" in entry:
                hello = entry["hello"]
            elif "request" in entry and "answer" in entry:
                request = entry["request"]
                answers.setdefault(request_key(request["method"], request.get("params", {})), []).append(entry["answer"])
            else:
                raise ValueError(f"{path}:{number}: neither a hello nor a request with its answer")
    if hello is None:
        raise ValueError(f"{path}: no hello recorded")
    return hello, answers


def replay(path):
    try:
        hello, answers = read_session(path)
    except (OSError, ValueError) as error:
        refuse(f"recorded session {error}")
        return
    send(hello)
    served = {}
    for method, request_id, params in requests():
        key = request_key(method, params)
        recorded = answers.get(key)
        if not recorded:
            send({"id": request_id, "error": {"message": f"{path}: no answer recorded for this {method} request (record the session again)"}})
            continue
        nth = served.get(key, 0)
        served[key] = nth + 1
        send({"id": request_id, **recorded[nth % len(recorded)]})


def record(path, command):
    """Passes the harness's lines to the runner and back; pairs each request with its answer by id."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    pending, lock = {}, threading.Lock()
    with open(path, "w", encoding="utf-8") as out:
        def forward_requests():
            for line in sys.stdin:
                if line.strip():
                    request = json.loads(line)
                    with lock:
                        pending[request.get("id")] = {"method": request.get("method"), "params": request.get("params", {})}
                try:
                    child.stdin.write(line)
                    child.stdin.flush()
                except BrokenPipeError:
                    return
            child.stdin.close()

        threading.Thread(target=forward_requests, daemon=True).start()
        for line in child.stdout:
            if line.strip():
                message = json.loads(line)
                if "protocol" in message:
                    out.write(json.dumps({"hello": message}) + "\n")
                else:
                    with lock:
                        request = pending.pop(message.get("id"), None)
                    if request is not None and request["method"] != "shutdown":
                        answer = {k: message[k] for k in ("result", "error") if k in message}
                        out.write(json.dumps({"request": request, "answer": answer}) + "\n")
            sys.stdout.write(line)
            sys.stdout.flush()
    sys.exit(child.wait())


def main(argv):
    if len(argv) >= 2 and argv[0] == "replay":
        replay(argv[1])
    elif len(argv) >= 4 and argv[0] == "record" and argv[2] == "--":
        record(argv[1], argv[3:])
    else:
        sys.stderr.write("usage: recorded_session.py record SESSION.jsonl -- RUNNER COMMAND... | replay SESSION.jsonl\n")
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
