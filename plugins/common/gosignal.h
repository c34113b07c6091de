/*
 * gosignal.h - the signal in a Go process status text ("signal: killed",
 * os.ProcessState.String), as daemons written in Go report it (E2B's envd,
 * OpenSandbox's execd).
 */
#ifndef SBXP_GOSIGNAL_H
#define SBXP_GOSIGNAL_H

/* The signal number named after "signal: " in status, or 0 when none. */
int sbxp_go_signal_number(const char *status);

#endif /* SBXP_GOSIGNAL_H */
