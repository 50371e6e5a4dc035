package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"
)

// DefaultSocket is where the node daemon listens, and where `gopmi run`
// and the tools look for it, unless told otherwise (-daemon,
// GOPMI_DAEMON).
const DefaultSocket = "/run/gopmi/gopmi.sock"

// EnvSocket names the node daemon's socket for the runs that use it
// (gopmi run, the Slurm coordinator); "none": run alone.
const EnvSocket = "GOPMI_DAEMON"

// DefaultStateDir keeps the published names across restarts, unless
// systemd's StateDirectory= says otherwise ($STATE_DIRECTORY).
const DefaultStateDir = "/var/lib/gopmi"

// RunOptions configure Run.
type RunOptions struct {
	// Socket is the path to listen on when systemd passed no socket
	// (LISTEN_FDS); default DefaultSocket.
	Socket string
	// StateDir holds names.json and names.journal; default
	// $STATE_DIRECTORY, else DefaultStateDir.
	StateDir string
	// Grace: see Options.Grace.
	Grace time.Duration
	// Listen, when set, makes this daemon its cluster's hub: it also
	// serves the daemons of other nodes on this TCP address (host:port),
	// those that hold the key in KeyFile.
	Listen string
	// Upstream, when set, makes this daemon relay every call to the hub
	// at this address (host:port), as Node, with the key in KeyFile; it
	// then keeps no state of its own.
	Upstream string
	KeyFile  string
	// Node names this node to its hub; default the host name.
	Node string
	// MaxNames and MaxNameBytes: see Options.
	MaxNames, MaxNameBytes int
	Logger                 zerolog.Logger
	Version                string
}

// Run is `gopmi daemon`: it serves the node until ctx ends. Under systemd
// it takes the socket systemd made (socket activation) and says READY=1,
// STATUS= (jobs and processes served), WATCHDOG=1 when WatchdogSec is set,
// and STOPPING=1; without systemd it listens on Socket itself.
func Run(ctx context.Context, o RunOptions) error {
	log := o.Logger
	var key []byte
	switch {
	case o.Listen != "" && o.Upstream != "":
		return errors.New("a hub (-listen) relays to no other hub (-upstream)")
	case (o.Listen != "" || o.Upstream != "") && o.KeyFile == "":
		return errors.New("a hub and the daemons that relay to it need the link key (-key FILE)")
	case o.KeyFile != "" && o.Listen == "" && o.Upstream == "":
		return errors.New("-key is the link key of a hub (-listen) or of a daemon that relays to one (-upstream); this daemon is neither")
	case o.Upstream != "" && o.StateDir != "":
		return errors.New("a daemon that relays to a hub (-upstream) keeps no state of its own: the hub keeps the names (drop -state)")
	case o.Upstream != "" && !hasPort(o.Upstream):
		return fmt.Errorf("-upstream %q: want the hub's host:port", o.Upstream)
	case o.KeyFile != "":
		var err error
		if key, err = LoadKey(o.KeyFile); err != nil {
			_, _ = sddaemon.SdNotify(false, "STATUS="+err.Error())
			return err
		}
	}
	l, how, err := listener(o.Socket)
	if err != nil {
		_, _ = sddaemon.SdNotify(false, "STATUS=cannot listen: "+err.Error()+"\nERRNO=98")
		return err
	}
	if o.Upstream != "" {
		return runRelay(ctx, o, l, how, key)
	}
	var hub net.Listener
	if o.Listen != "" {
		if hub, err = net.Listen("tcp", o.Listen); err != nil {
			l.Close()
			_, _ = sddaemon.SdNotify(false, "STATUS=cannot listen for other nodes: "+err.Error()+"\nERRNO=98")
			return fmt.Errorf("hub: %w", err)
		}
	}
	dir := o.StateDir
	if dir == "" {
		dir = os.Getenv("STATE_DIRECTORY")
	}
	if dir == "" {
		dir = DefaultStateDir
	}
	closeAll := func() {
		l.Close()
		if hub != nil {
			hub.Close()
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		closeAll()
		return fmt.Errorf("state directory: %w", err)
	}
	var srv *Server
	status := func() {
		jobs, procs := srv.Counts()
		_, _ = sddaemon.SdNotify(false, fmt.Sprintf("STATUS=serving %d jobs, %d processes", jobs, procs))
	}
	srv, err = NewServer(Options{StateFile: filepath.Join(dir, "names.json"), Grace: o.Grace, Logger: log, Version: o.Version,
		MaxNames: o.MaxNames, MaxNameBytes: o.MaxNameBytes,
		OnChange: func() { status() }})
	if err != nil {
		closeAll()
		return err
	}
	defer srv.Close()
	ev := log.Info().Str("socket", l.Addr().String()).Str("from", how).Str("state", dir)
	hubDone := make(chan error, 1)
	// The hub stops with the local socket, whatever stopped that.
	hctx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	if hub != nil {
		ev = ev.Str("hub", hub.Addr().String())
		go func() { hubDone <- srv.ServeHub(hctx, hub, key) }()
	} else {
		hubDone <- nil
	}
	ev.Msg("gopmi daemon serving")
	if _, err := sddaemon.SdNotify(false, sddaemon.SdNotifyReady); err != nil {
		log.Warn().Err(err).Msg("sd_notify READY")
	}
	status()
	wctx, stopWatchdog := context.WithCancel(ctx)
	var watching sync.WaitGroup
	if every, err := sddaemon.SdWatchdogEnabled(false); err == nil && every > 0 {
		watching.Go(func() { watchdog(wctx, srv, every/2) })
	}
	err = srv.ServeLocal(ctx, l)
	stopWatchdog()
	watching.Wait()
	stopHub()
	if herr := <-hubDone; err == nil {
		err = herr
	}
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	log.Info().Msg("gopmi daemon stopping")
	return err
}

// hasPort reports whether addr is host:port.
func hasPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != ""
}

// runRelay is Run for a daemon that relays to its hub.
func runRelay(ctx context.Context, o RunOptions, l net.Listener, how string, key []byte) error {
	node := o.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	r := NewUpstream(o.Upstream, node, key, o.Logger)
	o.Logger.Info().Str("socket", l.Addr().String()).Str("from", how).Str("hub", o.Upstream).Str("node", node).Msg("gopmi daemon relaying to its hub")
	if _, err := sddaemon.SdNotify(false, sddaemon.SdNotifyReady); err != nil {
		o.Logger.Warn().Err(err).Msg("sd_notify READY")
	}
	tick := time.Second
	if every, err := sddaemon.SdWatchdogEnabled(false); err == nil && every > 0 {
		tick = min(tick, every/2)
	}
	sctx, stop := context.WithCancel(ctx)
	var status sync.WaitGroup
	defer status.Wait()
	defer stop()
	status.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		last := ""
		for {
			if st := r.Status(); st != last {
				_, _ = sddaemon.SdNotify(false, "STATUS="+st)
				last = st
			}
			_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	})
	err := r.Serve(ctx, l)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	o.Logger.Info().Msg("gopmi daemon stopping")
	return err
}

// watchdog says WATCHDOG=1 while the server answers: a wedged daemon
// (its lock held for good) stops saying it, and systemd restarts it.
func watchdog(ctx context.Context, srv *Server, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			srv.Counts() // takes the lock
			_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
		}
	}
}

// listener is systemd's socket when it passed one, else a socket at path
// that every user may connect to: access is decided per call, from the
// peer's credentials.
func listener(path string) (net.Listener, string, error) {
	ls, err := activation.Listeners()
	if err != nil {
		return nil, "", fmt.Errorf("systemd's sockets: %w", err)
	}
	for i, l := range ls {
		if l == nil {
			continue
		}
		for _, extra := range ls[i+1:] {
			if extra != nil {
				extra.Close()
			}
		}
		if l.Addr().Network() != "unix" {
			l.Close()
			return nil, "", errors.New("systemd passed a socket that is not a unix stream socket (gopmi.socket wants ListenStream=/run/gopmi/gopmi.sock)")
		}
		return l, "systemd (socket activation)", nil
	}
	if path == "" {
		path = DefaultSocket
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, "", err
	}
	// A socket left by a daemon that died is replaced; a live one is not,
	// nor anything that is not a socket.
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, "", fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, "", fmt.Errorf("%s: another daemon is serving it", path)
		}
		_ = os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, "", err
	}
	return l, "-socket " + strconv.Quote(path), nil
}
