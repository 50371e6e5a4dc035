package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/journald"

	"github.com/gopmi/gopmi/hostrm/daemon"
	"github.com/gopmi/gopmi/hostrm/link"
	"github.com/gopmi/gopmi/plugin"
)

// envDaemon names the node daemon's socket for gopmi run and the tools.
const envDaemon = daemon.EnvSocket

// daemonPath is where the tools look for the node daemon.
func daemonPath(flagged string) string { return daemon.SocketPath(flagged) }

// daemonCmd is `gopmi daemon`: the node daemon, in the foreground.
func daemonCmd(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopmi daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", daemon.DefaultSocket, "unix socket to listen on when systemd passes none (socket activation)")
	state := fs.String("state", "", "directory that keeps published names across restarts (default $STATE_DIRECTORY, else "+daemon.DefaultStateDir+")")
	grace := fs.Duration("grace", daemon.DefaultGrace, "how long a run whose connection closed keeps its jobs and names")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	listen := fs.String("listen", "", "be the cluster's hub: also serve the daemons of other nodes on this TCP `host:port` (needs -key)")
	upstream := fs.String("upstream", "", "relay every call to the hub at this TCP `host:port`, so that runs on every node share one name space (needs -key)")
	keyFile := fs.String("key", "", "the link key shared by the hub and its nodes: a `file` only root may read (head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE)")
	node := fs.String("node", "", "this node's name to its hub (default the host name)")
	maxNames := fs.Int("max-names", daemon.DefaultMaxNames, "the most names one user may have published on the node (on a hub: in the cluster)")
	maxNameBytes := fs.Int("max-name-bytes", daemon.DefaultMaxNameBytes, "the most bytes (keys and values) one user's published names may hold")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: gopmi daemon [flags]\n\nThe node daemon: the name service and job registry that every gopmi run on this node shares,\nand what gopmi ps and gopmi query ask. Under systemd, gopmi.socket starts it.\nOne daemon of a cluster may serve as its hub (-listen), to which the others relay (-upstream).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "gopmi daemon: unexpected arguments %q (flags only; -h lists them)\n", fs.Args())
		return 2
	case *grace <= 0:
		fmt.Fprintf(stderr, "gopmi daemon: -grace %v: want a positive duration\n", *grace)
		return 2
	}
	lvl, err := zerolog.ParseLevel(*level)
	if err != nil || lvl == zerolog.NoLevel {
		fmt.Fprintf(stderr, "gopmi daemon: -log-level %q: want debug, info, warn or error\n", *level)
		return 2
	}
	log := zerolog.New(daemonLogWriter(stderr)).Level(lvl).With().Timestamp().Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, daemon.RunOptions{Socket: *sock, StateDir: *state, Grace: *grace, Logger: log, Version: version,
		MaxNames: *maxNames, MaxNameBytes: *maxNameBytes,
		Listen: *listen, Upstream: *upstream, KeyFile: *keyFile, Node: *node}); err != nil {
		log.Error().Err(err).Msg("gopmi daemon: exiting")
		return 1
	}
	return 0
}

// daemonLogWriter writes to journald, with each line's priority, when
// stderr is the journal (systemd sets JOURNAL_STREAM), else to stderr as
// text.
func daemonLogWriter(stderr io.Writer) io.Writer {
	if os.Getenv("JOURNAL_STREAM") != "" {
		if ok, err := journal.StderrIsJournalStream(); err == nil && ok {
			return journald.NewJournalDWriter()
		}
	}
	return zerolog.ConsoleWriter{Out: stderr, NoColor: true, TimeFormat: "15:04:05.000"}
}

// askDaemon runs one query, with its qualifiers, against the daemon at
// path.
func askDaemon(path string, quals []plugin.Info, keys ...string) (map[string]string, error) {
	if !daemon.IsSocket(path) {
		return nil, fmt.Errorf("no node daemon at %s (start it: systemctl start gopmi.socket, or gopmi daemon -socket PATH)", path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := link.Dial(ctx, path)
	switch {
	case errors.Is(err, plugin.ErrPermission):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("the node daemon at %s does not answer (%v): start it (systemctl start gopmi.socket)", path, errors.Unwrap(err))
	}
	defer c.Close()
	resp, err := c.Backend().Query(ctx, &plugin.QueryRequest{Queries: []plugin.Query{{Keys: keys, Qualifiers: quals}}})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range resp.Results {
		out[r.Key] = r.Value
	}
	return out, nil
}

// psCmd is `gopmi ps`: the jobs the node daemon knows that the caller may
// see (its own; root: all).
func psCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopmi ps", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("daemon", "", "the node daemon's socket (default $"+envDaemon+", else "+daemon.DefaultSocket+")")
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("a", false, "also jobs that ended (the last hour)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: gopmi ps [flags]\n\nThe jobs the node daemon knows: yours (root: everyone's).\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gopmi ps: unexpected arguments %q\n", fs.Args())
		return 2
	}
	res, err := askDaemon(daemonPath(*path), nil, plugin.QueryJobs)
	if err != nil {
		fmt.Fprintf(stderr, "gopmi ps: %v\n", err)
		return 1
	}
	var jobs []plugin.JobInfo
	if err := json.Unmarshal([]byte(res[plugin.QueryJobs]), &jobs); err != nil {
		fmt.Fprintf(stderr, "gopmi ps: the daemon's answer: %v\n", err)
		return 1
	}
	if !*all {
		kept := jobs[:0]
		for _, j := range jobs {
			if j.State == "running" {
				kept = append(kept, j)
			}
		}
		jobs = kept
	}
	if *asJSON {
		if jobs == nil {
			jobs = []plugin.JobInfo{}
		}
		b, _ := json.MarshalIndent(jobs, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tUSER\tPID\tRANKS\tNODES\tSTATE\tAGE\tTASK PIDS\tCOMMAND")
	now := time.Now()
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", printable(j.Nspace), printable(j.User), j.PID, j.Size,
			printable(strings.Join(j.Nodes, ",")), printable(j.State), now.Sub(j.Started).Round(time.Second), pidList(j.Pids), printable(j.Cmd))
	}
	tw.Flush()
	return 0
}

// pidList is the first few task pids, "-" when none are known.
func pidList(pids []int) string {
	if len(pids) == 0 {
		return "-"
	}
	var parts []string
	for i, p := range pids {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("... (%d)", len(pids)))
			break
		}
		parts = append(parts, strconv.Itoa(p))
	}
	return strings.Join(parts, ",")
}

// queryCmd is `gopmi query`: RFC0010's query against the node daemon.
func queryCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopmi query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("daemon", "", "the node daemon's socket (default $"+envDaemon+", else "+daemon.DefaultSocket+")")
	asJSON := fs.Bool("json", false, "print JSON")
	nspace := fs.String("nspace", "", "the `job` the job keys are about (qualifier "+plugin.QualNspace+")")
	node := fs.String("node", "", "the node "+plugin.QueryLocalPeers+" and "+plugin.QueryLocalProcTable+" are about (qualifier "+plugin.QualHostname+"; default the caller's)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: gopmi query [flags] [key...]

The contract's query vocabulary (PMIx RFC0010 names; docs/admin/daemon.md: "gopmi query"),
answered alike by the node daemon, a gopmi run and a Slurm step:
  %-18s the running jobs you may see, comma-separated (the default; alias namespaces)
  %-18s the jobs, JSON (gopmi ps)
  %-18s the published names, JSON
  %-18s what your jobs logged, JSON (gopmi log)
of a job (-nspace): asked of the run that serves it while it runs
  %-18s running, finished, or why it failed (alias job-status)
  %-18s its processes: rank, node, pid, state, app, exit status, JSON (alias proc-table)
  %-18s the same on one node (-node)
  %-18s its ranks on one node (-node), comma-separated (alias local-peers)
  %-18s its nodes, comma-separated (alias node-list)

flags:
`, plugin.QueryNamespaces, plugin.QueryJobs, plugin.QueryNames, plugin.QueryJobLog,
			plugin.QueryJobStatus, plugin.QueryProcTable, plugin.QueryLocalProcTable, plugin.QueryLocalPeers, plugin.QueryNodeList)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	keys := fs.Args()
	if len(keys) == 0 {
		keys = []string{plugin.QueryNamespaces}
	}
	var quals []plugin.Info
	if *nspace != "" {
		quals = append(quals, plugin.Info{Key: plugin.QualNspace, Value: *nspace})
	}
	if *node != "" {
		quals = append(quals, plugin.Info{Key: plugin.QualHostname, Value: *node})
	}
	res, err := askDaemon(daemonPath(*path), quals, keys...)
	if err != nil {
		fmt.Fprintf(stderr, "gopmi query: %v\n", err)
		return 1
	}
	if *asJSON {
		out := map[string]any{}
		for k, v := range res {
			var parsed any
			if json.Unmarshal([]byte(v), &parsed) == nil {
				out[k] = parsed
			} else {
				out[k] = v
			}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	sorted := make([]string, 0, len(res))
	for k := range res {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		fmt.Fprintf(stdout, "%s: %s\n", printable(k), printable(res[k]))
	}
	return 0
}

// logCmd is `gopmi log`: the node daemon's log of the caller's jobs (one
// job with an argument): what it noted (registered, ended, lost) and how
// each run said it ended.
func logCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gopmi log", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("daemon", "", "the node daemon's socket (default $"+envDaemon+", else "+daemon.DefaultSocket+")")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var quals []plugin.Info
	if fs.NArg() > 0 {
		quals = []plugin.Info{{Key: plugin.QualNspace, Value: fs.Arg(0)}}
	}
	res, err := askDaemon(daemonPath(*path), quals, plugin.QueryJobLog)
	if err != nil {
		fmt.Fprintf(stderr, "gopmi log: %v\n", err)
		return 1
	}
	var entries []plugin.LogEntry
	if err := json.Unmarshal([]byte(res[plugin.QueryJobLog]), &entries); err != nil {
		fmt.Fprintf(stderr, "gopmi log: the daemon's answer: %v\n", err)
		return 1
	}
	if *asJSON {
		b, _ := json.MarshalIndent(entries, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	for _, e := range entries {
		fmt.Fprintf(stdout, "%s %s %s %s: %s\n", e.Time.Local().Format("2006-01-02 15:04:05.000"), printable(e.Job), printable(e.User), printable(e.From), printable(e.Msg))
	}
	return 0
}
