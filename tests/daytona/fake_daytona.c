/* fake_daytona.c - see fake_daytona.h. */
#include "fake_daytona.h"

#include <stddef.h>

int fake_daytona_start(struct fake_service *f, const char *api_key)
{
    return fake_start_script(f, "tests/daytona/fake_daytona.py", NULL, api_key);
}
