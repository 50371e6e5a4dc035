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
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/local/link"
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
	// StateDir holds names.json; default $STATE_DIRECTORY, else
	// DefaultStateDir.
	StateDir string
	// Grace: see Options.Grace.
	Grace   time.Duration
	Logger  zerolog.Logger
	Version string
}

// Run is `gopmi daemon`: it serves the node until ctx ends. Under systemd
// it takes the socket systemd made (socket activation) and says READY=1,
// STATUS= (jobs and processes served), WATCHDOG=1 when WatchdogSec is set,
// and STOPPING=1; without systemd it listens on Socket itself.
func Run(ctx context.Context, o RunOptions) error {
	log := o.Logger
	l, how, err := listener(o.Socket)
	if err != nil {
		_, _ = sddaemon.SdNotify(false, "STATUS=cannot listen: "+err.Error()+"\nERRNO=98")
		return err
	}
	dir := o.StateDir
	if dir == "" {
		dir = os.Getenv("STATE_DIRECTORY")
	}
	if dir == "" {
		dir = DefaultStateDir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		l.Close()
		return fmt.Errorf("state directory: %w", err)
	}
	var srv *Server
	status := func() {
		jobs, procs := srv.Counts()
		_, _ = sddaemon.SdNotify(false, fmt.Sprintf("STATUS=serving %d jobs, %d processes", jobs, procs))
	}
	srv, err = NewServer(Options{StateFile: filepath.Join(dir, "names.json"), Grace: o.Grace, Logger: log, Version: o.Version,
		OnChange: func() { status() }})
	if err != nil {
		l.Close()
		return err
	}
	defer srv.Close()
	log.Info().Str("socket", l.Addr().String()).Str("from", how).Str("state", dir).Msg("gopmi daemon serving")
	if _, err := sddaemon.SdNotify(false, sddaemon.SdNotifyReady); err != nil {
		log.Warn().Err(err).Msg("sd_notify READY")
	}
	status()
	if every, err := sddaemon.SdWatchdogEnabled(false); err == nil && every > 0 {
		go watchdog(ctx, srv, every/2)
	}
	err = link.ServeConns(ctx, l, srv, ConnContext)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	log.Info().Msg("gopmi daemon stopping")
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
