#!/bin/bash
# The escape attempts (t0200) again, in a sandbox with an egress allowlist:
# the capture's rules, routes and listeners open none of them.
WARD_RUN_NET=allow:example.test,example.org:8080
. "$(dirname "$0")/t0200-escapes.sh"
