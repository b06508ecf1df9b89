#!/usr/bin/env python3
"""ctxsw.py OUT CMD... -- run CMD; once it has ended, write to OUT the context switches of it and
its threads (voluntary and involuntary, getrusage of the reaped child), and exit as it did.
SIGINT and SIGTERM are passed on to it (t_spin_bells: the doorbells a process was rung can
only have woken it from a sleep, each a context switch)."""
import os
import resource
import signal
import sys


def main():
    out = sys.argv[1]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(sys.argv[2], sys.argv[2:])
        finally:
            os._exit(127)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    _, status = os.waitpid(pid, 0)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as f:
        f.write("%d\n" % (ru.ru_nvcsw + ru.ru_nivcsw))
    code = os.waitstatus_to_exitcode(status)
    sys.exit(code if code >= 0 else 128 - code)


main()
