// Package shim is gopmi-shim, the per-job, per-node process that serves PMI
// to the tasks of one job on one node.
//
// A step daemon (slurmstepd with the mpi/gopmi plugin, `gopmi run`, a
// vendor's node agent) creates one socketpair per local task, starts the
// shim with the server ends and a bootstrap message, and starts the tasks
// with PMI_FD, PMI_RANK, PMI_SIZE. It need not wait for the shim's
// readiness first (`gopmi run` does not): a task's requests wait in its
// socket until the shim reads them, and readiness or a start-up failure
// arrives on NOTIFY_SOCKET meanwhile. The shim's life is the job step's: it never daemonizes, and it ends when
// every local task has finalized and closed its connection, when the job
// fails, or when it is told to stop.
//
// # Data flow
//
//	stdin (protojson gopmi.shim.v1.Bootstrap, to EOF) ──► serve.NewConfig
//	inherited fds (LISTEN_FDS/LISTEN_FDNAMES) ──► net.Conn per task
//	       ──► serve.Start: one reader and one writer goroutine per task,
//	           bridge.Job (the PMI engine) deciding the answers
//	bridge.Backend ──► plugin.Full ──gRPC (grpcplugin)──► gopmi-rm-<name>
//
// The serving loop is package serve, which `gopmi run` also uses to serve
// a job on one node from its own process; both follow serve.Host's one
// host protocol (serve, readiness, the backend brought up beside the job,
// its failure failing the job), each with its own way to start the
// backend and to report readiness.
//
// # Backend: a process, or in process
//
// gopmi-shim starts gopmi-rm-<name> as a go-plugin process (RunConfig's
// StartPlugin, shim/goplugin.Start). A resource manager's own binary may
// instead link this package and serve its backend in the shim's process
// (RunConfig.Backend): gopmi-slurm shim does, so a Slurm step costs one
// Go process per node, not two. This package does not link go-plugin, so
// such a binary does not pay go-plugin's package initialisation either. What is the shim's own is what
// makes it a process a step daemon can start: the bootstrap on stdin, the
// inherited fds, readiness, the backend plugin, signals and exit status.
//
// # Start-up
//
// Run reads the whole bootstrap from stdin before anything else (go-plugin
// hands the host's stdin to the plugin), validates it and fills in the
// defaults, takes the task fds, resolves the backend binary
// gopmi-rm-<backend.name> (next to the shim's own executable, then in PATH),
// starts serving every task connection (serve.Start) and reports
// readiness with sd_notify: "READY=1" means the tasks are served. Only then
// does the backend start, with a private 0700 socket directory, and get its
// Configure: at once for a job on several nodes, whose fences need it, and
// for a job on one node only when a request first needs it (many never
// do); the job's bridge.Backend handle asks for it. A task's local requests (init, put, a one-node fence, get) are
// answered meanwhile, and those that need the backend wait for it within
// their own deadlines. A job that ends cleanly before its backend is up
// does not wait for it. A failure before READY is reported as
// "STATUS=<error>\nERRNO=<n>" before the shim exits; a later one (the backend
// failed to start or died) as "STOPPING=1\nSTATUS=<reason>", so the step
// daemon can say why either way. A PMIx face's READY also carries its
// tasks' environment, one "GOPMI_PMIX_VAR=KEY=VALUE" line per variable
// (serve.PMIxVar), which the step daemon gives every task before it
// starts them: it splits the message into lines and parses nothing else
// (GOPMI_PMIX_ENV, the same as a JSON array, is for older step daemons).
// NOTIFY_SOCKET is read and removed from the
// environment at the very start, so the backend plugin, which inherits the
// environment, never sees it.
//
// # Bootstrap
//
// The bootstrap is a gopmi.shim.v1.Bootstrap as protojson. For node 1 of a
// 4-rank job on two nodes (proto/gopmi/shim/v1/example.json; proto/README
// lists the conventions: field name spellings, durations as "3s", enums by
// name):
//
//	{
//	  "version": 1,
//	  "job": {
//	    "nspace": "slurm.4242.0",
//	    "size": 4,
//	    "nodes": [
//	      {"id": 0, "name": "node01", "ranks": [0, 1]},
//	      {"id": 1, "name": "node02", "ranks": [2, 3]}
//	    ],
//	    "apps": [{"firstRank": 0, "size": 4, "cmd": "./a.out"}],
//	    "attrs": [{"key": "PMI_hwloc_xmlfile", "value": "/tmp/topo.xml"}]
//	  },
//	  "nodeId": 1,
//	  "tasks": [
//	    {"rank": 2, "fdName": "rank2"},
//	    {"rank": 3, "fdName": "rank3"}
//	  ],
//	  "backend": {
//	    "name": "slurm",
//	    "args": ["-coordinator", "10.0.0.1:7777"],
//	    "config": "{\"tree_width\":16}"
//	  },
//	  "limits": {"valMax": 1024},
//	  "timeouts": {"fence": "120s", "backendStart": "30s", "shutdown": "5s"},
//	  "fenceMode": "FENCE_MODE_COLLECT",
//	  "logLevel": "info"
//	}
//
// # Task fds and the LISTEN_PID contract
//
// Task connections arrive as inherited fds 3, 4, ... described by
// LISTEN_FDS (their number) and LISTEN_FDNAMES (colon-separated names, one
// per fd), the systemd socket-activation convention read by go-systemd's
// activation.Files. Each bootstrap Task names its fd with fd_name; an fd no
// task names is closed with a warning; pmi_port_fd names a listening socket
// for tasks that connect with PMI_PORT/PMI_ID.
//
// systemd also sets LISTEN_PID to the receiving process's pid so that a
// grandchild does not take fds meant for its parent. A launcher written in
// Go cannot set it (os/exec has no hook between fork and exec), so the
// contract is: a launcher either sets LISTEN_PID to the shim's pid after
// fork, or leaves LISTEN_PID unset, in which case the shim takes the fds as
// its own (it sets LISTEN_PID to its own pid before calling
// activation.Files). A LISTEN_PID that names another process is an error.
// The variables are removed from the environment and the fds are marked
// close-on-exec, so the backend plugin inherits none of them.
//
// # Exit status
//
// Main returns the status the step daemon sees (see serve's Exit* constants):
// 0 every task finalized or closed cleanly, 1 internal error, 2 bad
// bootstrap or usage, 3 the backend failed to start or died, 4 the job
// failed, 5 a task aborted the job. The last line the shim writes to its
// log says why it exits.
//
// # Signals
//
// SIGTERM and SIGINT fail the job (pending requests are answered with an
// error) and shut the shim down within the bootstrap's shutdown time-out;
// SIGUSR1 writes every goroutine's stack to the log. SIGHUP is the step
// daemon saying that every task of the node ended: a PMIx face, which
// cannot tell a task that never connected (a program that is not a PMIx
// client) from one not started yet, then stops and exits 0; a PMI shim
// sees its tasks' connections close instead, and takes SIGHUP as SIGTERM.
//
// # Time-outs
//
// Every wait is bounded: reading the bootstrap (30s), starting and
// configuring the backend (timeouts.backend_start), the first byte from
// every task or the PMI_PORT connections (timeouts.connect, when set),
// a task that stops reading its replies (10s per write, and a few
// line_max of queued replies), and shutting down (timeouts.shutdown).
// The PMI waits themselves (fence, get, lookup, spawn) are the bridge's.
//
// # Logging and environment
//
// The log is zerolog JSON on stderr with job= and node= on every line, at
// bootstrap.log_level; GOPMI_LOG_FORMAT=console makes it text for a
// human, and when stderr is the systemd journal (JOURNAL_STREAM) the shim
// writes to journald natively. The backend's stderr is relayed into the
// same log by grpcplugin. The collector's target has one owner in every
// gopmi process, shim/serve's gc.go: Go's default, lowered while the
// process's jobs hold a big KVS, and raised for a Slurm step's short-lived
// processes (serve.StepGC); GOGC in the environment still applies.
package shim
