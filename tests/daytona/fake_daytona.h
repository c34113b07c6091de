/*
 * fake_daytona.h - start tests/daytona/fake_daytona.py (the fake Daytona
 * API and toolbox) on loopback for a test. Stopping it, requests to its
 * control endpoints and faults are tests/e2b/fake_service.h's (fake_stop,
 * fake_http, fake_faults), which work on any fake of that shape.
 */
#ifndef SBX_TEST_FAKE_DAYTONA_H
#define SBX_TEST_FAKE_DAYTONA_H

#include "../e2b/fake_service.h"

/* Start the fake; api_key may be NULL (no auth). 0, or -1 (python3
 * missing, no port within 10 s). */
int fake_daytona_start(struct fake_service *f, const char *api_key);

#endif
