# An "untrusted" script, as a model might write it: it does some honest work,
# then pokes at the walls. Run it with `make run`.
import os
import socket

print("sum of squares:", sum(i * i for i in range(10)))
print("running as uid", os.getuid(), "on host", socket.gethostname())

def attempt(what, fn):
    try:
        result = fn()
        print(f"  {what}: allowed ({result})")
    except Exception as e:  # every wall answers with an error
        print(f"  {what}: denied ({type(e).__name__}: {e})")

attempt("read /etc/shadow", lambda: open("/etc/shadow").read()[:20])
attempt("list /home", lambda: os.listdir("/home"))
attempt("write /usr/bin/evil", lambda: open("/usr/bin/evil", "w"))
attempt("connect to 1.1.1.1:53",
        lambda: socket.create_connection(("1.1.1.1", 53), timeout=1))
attempt("list the processes it can see", lambda: sorted(p for p in os.listdir("/proc") if p.isdigit()))
attempt("write /workspace/notes.txt",
        lambda: open("/workspace/notes.txt", "w").write("scratch space"))
