#!/usr/bin/env python3
"""labkit.skip: 77 (skipped) normally, a failure with its reason when CI=true. Runs a real lab
test as an unprivileged user (setpriv) when root, so the path a CI machine without root takes
is the one checked."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_as_nobody(env_ci):
    env = dict(os.environ)
    env.pop("CI", None)
    if env_ci is not None:
        env["CI"] = env_ci
    cmd = [sys.executable, os.path.join(HERE, "lab_rtt_test.py"), "--exporter", "/bin/false",
           "--delayline", "/bin/false", "--lab-script", "/bin/false"]
    if os.geteuid() == 0:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def main():
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        print("FAILED: setpriv (util-linux) is needed to run as another user")
        return 1
    failed = 0
    for ci, want_rc, want_text in ((None, 77, "SKIP: the lab needs root"),
                                   ("false", 77, "SKIP: the lab needs root"),
                                   ("true", 1, "FAILED: cannot run with CI=true (a skip is a "
                                    "failure in CI): the lab needs root")):
        r = run_as_nobody(ci)
        ok = r.returncode == want_rc and want_text in r.stdout
        print("%s CI=%s: rc %d, %r" % ("ok    " if ok else "FAILED", ci, r.returncode,
                                       (r.stdout + r.stderr).strip()[-160:]))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
