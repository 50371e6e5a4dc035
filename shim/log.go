package shim

import (
	"io"
	"os"
	"runtime"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/journald"
)

// maxStackDump bounds a SIGUSR1 dump of every goroutine's stack.
const maxStackDump = 64 << 20

// newLogWriter picks where the log goes: journald when the shim's stderr
// is connected to the journal (JOURNAL_STREAM matches fd 2), so levels
// and fields survive; otherwise w, as JSON, or as text for a human when
// GOPMI_LOG_FORMAT=console. The writer is safe for concurrent use, since
// the backend's relayed stderr shares it.
func newLogWriter(w io.Writer, getenv func(string) string) io.Writer {
	if w == os.Stderr && getenv("JOURNAL_STREAM") != "" {
		if ok, err := journal.StderrIsJournalStream(); err == nil && ok {
			return journald.NewJournalDWriter()
		}
	}
	w = zerolog.SyncWriter(w)
	if getenv("GOPMI_LOG_FORMAT") == "console" {
		return zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: "15:04:05.000"}
	}
	return w
}

// dumpStacks logs every goroutine's stack, as containerd's shim does on
// SIGUSR1, to see where a stuck job waits.
func dumpStacks(log zerolog.Logger) {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= maxStackDump {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	log.Info().Str("stacks", string(buf)).Msg("goroutine dump (SIGUSR1)")
}
