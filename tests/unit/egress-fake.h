/* tests/unit/egress-fake.h — the test double of tests/unit/egress-fake.c. */
#ifndef WARD_EGRESS_FAKE_H
#define WARD_EGRESS_FAKE_H

#include <stdbool.h>

#include "ward/egress.h"

/* the listeners of the last sandbox attached (the test accepts on them) */
extern struct ward_egress_fds egress_fake_fds;
extern int egress_fake_attached;      /* how many attaches succeeded */
extern bool egress_fake_fail;         /* attach fails when set */
extern const char *egress_fake_bundle; /* what ward_egress_ca_bundle says */

#endif
