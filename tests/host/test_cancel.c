/* Cancellation tokens: flag plus a pollable fd. */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

#include "base/cancel.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

Test(cancel, fresh_token_is_not_fired_and_fd_not_readable)
{
    sbx_cancel *c;
    cr_assert_eq(sbx_cancel_new(&c), SBX_OK);
    cr_assert_not(sbx_cancel_fired(c));
    struct pollfd p = {c->fd, POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 0), 0);
    sbx_cancel_free(c);
}

static void *fire_later(void *arg)
{
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sbx_cancel_fire(arg);
    return NULL;
}

Test(cancel, firing_from_another_thread_wakes_poll)
{
    sbx_cancel *c;
    cr_assert_eq(sbx_cancel_new(&c), SBX_OK);
    pthread_t t;
    pthread_create(&t, NULL, fire_later, c);
    struct pollfd p = {c->fd, POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 5000), 1, "poll did not wake within 5 s");
    cr_assert(sbx_cancel_fired(c));
    pthread_join(t, NULL);
    sbx_cancel_fire(c); /* twice is harmless */
    cr_assert_eq(poll(&p, 1, 0), 1, "fd must stay readable");
    sbx_cancel_free(c);
}

static sbx_cancel *signal_token;
static void on_alarm(int sig)
{
    (void)sig;
    sbx_cancel_fire(signal_token);
}

Test(cancel, fire_is_usable_from_a_signal_handler)
{
    cr_assert_eq(sbx_cancel_new(&signal_token), SBX_OK);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    raise(SIGALRM);
    cr_assert(sbx_cancel_fired(signal_token));
    signal(SIGALRM, SIG_DFL);
    sbx_cancel_free(signal_token);
}
