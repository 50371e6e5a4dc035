// Package proc reads process state from /proc for the integration tests and
// the client runner: one process's /proc/PID/stat, the processes below a
// root in the parent links, and a bounded wait for a process to end.
//
// Process state comes from /proc, not kill(pid, 0): orphans on the machines
// these tests run on are not always reaped, so a dead process may linger as
// a zombie that kill still reaches.
package proc
