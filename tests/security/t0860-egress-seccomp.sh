#!/bin/bash
# The seccomp contract (t0100) again, in a sandbox with an egress allowlist:
# the capture's rules, routes and listeners add no way around a denial.
WARD_RUN_NET=allow:example.test,example.org:8080
. "$(dirname "$0")/t0100-seccomp-denials.sh"
