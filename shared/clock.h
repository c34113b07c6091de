/*
 * clock.h - deadlines and elapsed time (shared by the host and the
 * plugins; symbols prefixed sbxs_).
 */
#ifndef SBXS_CLOCK_H
#define SBXS_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC: for timeouts and elapsed time. */
int64_t sbxs_now_ms(void);

/* The time `ms` milliseconds from now on `clock` (CLOCK_REALTIME for
 * pthread_cond_timedwait), normalized. */
struct timespec sbxs_deadline_in(clockid_t clock, int64_t ms);

#endif
