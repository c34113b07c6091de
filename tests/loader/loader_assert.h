/* loader_assert.h - assertions shared by the loader tests. */
#ifndef SBX_TEST_LOADER_ASSERT_H
#define SBX_TEST_LOADER_ASSERT_H

#include <criterion/criterion.h>

#include <string.h>

/* Fail unless the error message contains `needle`. */
#define assert_msg_has(err, needle)                                            \
    cr_assert(strstr((err)->message, (needle)) != NULL,                        \
              "message lacks \"%s\": %s", (needle), (err)->message)

/* Fail unless the status is `want`, showing the message otherwise. */
#define assert_status(rc, err, want)                                           \
    cr_assert_eq((rc), (want), "status %d, want %d (%s): %s", (rc), (want),    \
                 #want, (err)->message)

#endif
