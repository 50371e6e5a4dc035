package local

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/gopmi/gopmi/plugin"
	"github.com/gopmi/gopmi/plugin/execpath"
)

// Spawn info keys gopmi-rm-local honours. MPICH's Hydra knows the same
// four (path, wdir, host/hosts, hostfile) and ignores the rest; here every
// other key is refused by name.
const (
	infoWdir  = "wdir"  // the tasks' working directory
	infoPath  = "path"  // a PATH-like list searched for the command first
	infoEnv   = "env"   // K=V entries, newline- or space-separated
	infoHost  = "host"  // accepted only when every name is this machine
	infoHosts = "hosts" // same as host
)

// Spawn starts a new job through the launcher: apps[i].MaxProcs tasks of
// each app, appnum i, in a job whose parent is the requestor's. It returns
// once the new job's shims are ready and its tasks started, bounded by
// req.Timeout (default 120s) and ctx.
//
// Info keys honoured per app: wdir, path, env, host/hosts (this machine
// only). Any other key, and any job info key, fails the spawn with
// ErrNotSupported naming it.
func (u *Universe) Spawn(ctx context.Context, req *plugin.SpawnRequest) (*plugin.SpawnResponse, error) {
	if u.opts.Launch == nil {
		return nil, plugin.Errorf(plugin.ErrNotSupported, "spawn: this universe has no launcher")
	}
	if len(req.JobInfo) > 0 {
		return nil, plugin.Errorf(plugin.ErrNotSupported, "spawn: job info key %q is not supported by %s", req.JobInfo[0].Key, u.name())
	}
	if len(req.Apps) == 0 {
		return nil, plugin.Errorf(plugin.ErrInvalidArgument, "spawn: no apps")
	}
	u.mu.Lock()
	_, err := u.lookupProc("spawn", req.Requestor)
	if err == nil {
		err = u.jobGone("spawn", req.Requestor.Nspace)
	}
	u.mu.Unlock()
	if err != nil {
		return nil, err
	}
	apps := make([]AppSpec, 0, len(req.Apps))
	for i, a := range req.Apps {
		spec, err := u.resolveApp(a)
		if err != nil {
			if len(req.Apps) > 1 {
				return nil, plugin.Wrapf(err, plugin.ErrUnavailable, "spawn: app %d", i)
			}
			return nil, err
		}
		apps = append(apps, spec)
	}
	spec, err := u.NewJob(apps, req.Requestor.Nspace, true, req.Preput)
	if err != nil {
		return nil, err
	}
	timeout := req.TimeoutOrDefault()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := u.opts.Launch(ctx, spec); err != nil {
		u.EndJob(spec.Job.Nspace, "launch failed: "+err.Error())
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, plugin.Errorf(plugin.ErrTimeout, "spawn of %s: not started within %s: %v", spec.Job.Nspace, plugin.RoundDuration(timeout), err)
		}
		return nil, plugin.Wrapf(err, plugin.ErrUnavailable, "spawn of %s", spec.Job.Nspace)
	}
	return &plugin.SpawnResponse{Nspace: spec.Job.Nspace}, nil
}

// resolveApp checks one app's info keys and finds its executable.
func (u *Universe) resolveApp(a plugin.SpawnApp) (AppSpec, error) {
	if a.MaxProcs < 1 {
		return AppSpec{}, plugin.Errorf(plugin.ErrInvalidArgument, "spawn %s: maxprocs %d", a.Cmd, a.MaxProcs)
	}
	if a.Cmd == "" {
		return AppSpec{}, plugin.Errorf(plugin.ErrInvalidArgument, "spawn: empty command")
	}
	base := u.opts.Wdir
	if base == "" {
		base, _ = os.Getwd()
	}
	dir := a.Cwd
	var pathList string
	env := append([]string(nil), a.Env...)
	for _, in := range a.Info {
		switch in.Key {
		case infoWdir:
			dir = in.Value
		case infoPath:
			pathList = in.Value
		case infoEnv:
			kvs, err := parseEnvInfo(in.Value)
			if err != nil {
				return AppSpec{}, err
			}
			env = append(env, kvs...)
		case infoHost, infoHosts:
			if err := u.checkHosts(in.Value); err != nil {
				return AppSpec{}, err
			}
		default:
			return AppSpec{}, plugin.Errorf(plugin.ErrNotSupported, "spawn: info key %q is not supported by %s", in.Key, u.name())
		}
	}
	if dir == "" {
		dir = base
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return AppSpec{}, plugin.Errorf(plugin.ErrInvalidArgument, "spawn %s: working directory %s is not a directory", a.Cmd, dir)
	}
	path, err := execpath.Command(a.Cmd, dir, pathList, getenv(u.opts.Env, "PATH"))
	if err != nil {
		return AppSpec{}, plugin.Wrapf(err, plugin.ErrNotFound, "spawn")
	}
	return AppSpec{Path: path, Args: a.Argv, Env: env, Dir: dir, Procs: a.MaxProcs}, nil
}

// parseEnvInfo splits an env info value into K=V entries: one per line
// when it has newlines, else separated by spaces.
func parseEnvInfo(v string) ([]string, error) {
	var fields []string
	if strings.Contains(v, "\n") {
		for l := range strings.SplitSeq(v, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				fields = append(fields, l)
			}
		}
	} else {
		fields = strings.Fields(v)
	}
	for _, f := range fields {
		if k, _, ok := strings.Cut(f, "="); !ok || k == "" {
			return nil, plugin.Errorf(plugin.ErrInvalidArgument, "spawn: info key \"env\": %q is not KEY=VALUE", f)
		}
	}
	return fields, nil
}

// checkHosts accepts a host list only if every name is this machine.
func (u *Universe) checkHosts(v string) error {
	for h := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		h, _, _ = strings.Cut(h, ":") // hydra's host:count
		if !u.isThisMachine(h) {
			return plugin.Errorf(plugin.ErrNotSupported, "spawn: host %q is not this machine (gopmi-rm-local runs every job on %s)", h, u.opts.Hostname)
		}
	}
	return nil
}

func (u *Universe) isThisMachine(h string) bool {
	host := u.opts.Hostname
	short, _, _ := strings.Cut(host, ".")
	switch h {
	case host, short, "localhost", "127.0.0.1", "::1":
		return true
	}
	if strings.HasPrefix(h, host+".") || strings.HasPrefix(h, short+".") {
		return true
	}
	// The simulated nodes of -ppn are this machine too.
	if rest, ok := strings.CutPrefix(h, host+"-"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
		return true
	}
	if ip := net.ParseIP(h); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// getenv finds key in a KEY=VALUE list; the last entry wins.
func getenv(env []string, key string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == key {
			v = val
		}
	}
	return v
}
