/*
 * gosignal.h - the signal in a Go process status text ("signal: killed",
 * os.ProcessState.String), as daemons written in Go report it (E2B's envd,
 * OpenSandbox's execd).
 */
#ifndef SBX_PLUGIN_GOSIGNAL_H
#define SBX_PLUGIN_GOSIGNAL_H

/* The signal number named after "signal: " in status, or 0 when none. */
int sbx_go_signal_number(const char *status);

#endif /* SBX_PLUGIN_GOSIGNAL_H */
