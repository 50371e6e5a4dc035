// Package hclogzero implements hashicorp/go-hclog's Logger on top of a
// zerolog.Logger, so that go-plugin's own messages and the log lines it
// relays from a plugin's stderr end up in gopmi's zerolog output with their
// levels and fields.
package hclogzero

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// ModuleField holds a logger's hclog name (go-plugin names the relay of a
// plugin's stderr after the plugin binary).
const ModuleField = "module"

type logger struct {
	z       zerolog.Logger
	name    string
	implied []any
	// level is shared by a logger and everything derived from it, as in
	// hclog, so SetLevel on the root reaches named children.
	level *atomic.Int32
}

// New returns an hclog.Logger that writes through z. Its level starts as
// EffectiveLevel(z); go-plugin reads it to skip plugin lines the host
// would drop.
func New(z zerolog.Logger) hclog.Logger {
	l := &logger{z: z, level: new(atomic.Int32)}
	l.level.Store(int32(fromZerolog(EffectiveLevel(z))))
	return l
}

// EffectiveLevel is the level below which z writes nothing: its own or
// zerolog's global one, whichever is higher.
func EffectiveLevel(z zerolog.Logger) zerolog.Level {
	return max(z.GetLevel(), zerolog.GlobalLevel())
}

func fromZerolog(lv zerolog.Level) hclog.Level {
	switch lv {
	case zerolog.TraceLevel:
		return hclog.Trace
	case zerolog.DebugLevel:
		return hclog.Debug
	case zerolog.InfoLevel:
		return hclog.Info
	case zerolog.WarnLevel:
		return hclog.Warn
	case zerolog.ErrorLevel, zerolog.FatalLevel, zerolog.PanicLevel:
		return hclog.Error
	case zerolog.Disabled:
		return hclog.Off
	default:
		return hclog.Trace
	}
}

func toZerolog(lv hclog.Level) zerolog.Level {
	switch lv {
	case hclog.Trace:
		return zerolog.TraceLevel
	case hclog.Debug:
		return zerolog.DebugLevel
	case hclog.Info:
		return zerolog.InfoLevel
	case hclog.Warn:
		return zerolog.WarnLevel
	case hclog.Error:
		return zerolog.ErrorLevel
	case hclog.Off:
		return zerolog.Disabled
	default:
		// NoLevel: hclog's "whatever the line says", which go-plugin uses
		// for relayed lines without @level; info keeps them visible.
		return zerolog.InfoLevel
	}
}

func (l *logger) enabled(lv hclog.Level) bool {
	cur := hclog.Level(l.level.Load())
	return cur != hclog.Off && lv != hclog.Off && (lv == hclog.NoLevel || lv >= cur)
}

// normalExit is go-plugin's message when a plugin process ends; it logs
// it at info on a clean exit (and at error, with the error, otherwise).
const normalExit = "plugin process exited"

// Log writes msg at level with args as key/value pairs. go-plugin's info
// line on every clean plugin exit is debug here: a backend ending with its
// job is not news.
func (l *logger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Info && msg == normalExit {
		level = hclog.Debug
	}
	if !l.enabled(level) {
		return
	}
	ev := l.z.WithLevel(toZerolog(level))
	if ev == nil {
		return
	}
	if l.name != "" {
		ev = ev.Str(ModuleField, l.name)
	}
	addPairs(ev, l.implied)
	addPairs(ev, args)
	ev.Msg(msg)
}

// addPairs follows hclog's conventions: keys are strings, and an odd value
// out goes under EXTRA_VALUE_AT_END.
func addPairs(ev *zerolog.Event, args []any) {
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			addValue(ev, hclog.MissingKey, args[i])
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		addValue(ev, key, args[i+1])
	}
}

func addValue(ev *zerolog.Event, key string, v any) {
	switch v := v.(type) {
	case nil:
		ev.Interface(key, nil)
	case string:
		ev.Str(key, v)
	case bool:
		ev.Bool(key, v)
	case int:
		ev.Int(key, v)
	case int32:
		ev.Int32(key, v)
	case int64:
		ev.Int64(key, v)
	case uint32:
		ev.Uint32(key, v)
	case uint64:
		ev.Uint64(key, v)
	case float64:
		ev.Float64(key, v)
	case time.Duration:
		ev.Str(key, v.String())
	case time.Time:
		ev.Time(key, v)
	case error:
		ev.Str(key, v.Error())
	case fmt.Stringer:
		ev.Str(key, v.String())
	case hclog.Format:
		if len(v) > 0 {
			if f, ok := v[0].(string); ok {
				ev.Str(key, fmt.Sprintf(f, v[1:]...))
				return
			}
		}
		ev.Interface(key, []any(v))
	default:
		ev.Interface(key, v)
	}
}

// Trace logs at trace level.
func (l *logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }

// Debug logs at debug level.
func (l *logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }

// Info logs at info level.
func (l *logger) Info(msg string, args ...any) { l.Log(hclog.Info, msg, args...) }

// Warn logs at warn level.
func (l *logger) Warn(msg string, args ...any) { l.Log(hclog.Warn, msg, args...) }

// Error logs at error level.
func (l *logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *logger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *logger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *logger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *logger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *logger) IsError() bool { return l.enabled(hclog.Error) }

func (l *logger) ImpliedArgs() []any { return append([]any(nil), l.implied...) }

func (l *logger) With(args ...any) hclog.Logger {
	c := *l
	c.implied = append(append([]any(nil), l.implied...), args...)
	return &c
}

func (l *logger) Name() string { return l.name }

func (l *logger) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (l *logger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *logger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

func (l *logger) GetLevel() hclog.Level { return hclog.Level(l.level.Load()) }

func (l *logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &stdWriter{l: l, force: opts.ForceLevel}
}

// stdWriter logs each write of a standard library logger as one line,
// taking the level from an "[INFO]"-style prefix unless one is forced.
type stdWriter struct {
	l     *logger
	force hclog.Level
}

func (w *stdWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\r\n"))
	level := w.force
	if level == hclog.NoLevel {
		level = hclog.Info
		for _, pre := range []struct {
			s  string
			lv hclog.Level
		}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error}} {
			if strings.HasPrefix(line, pre.s) {
				level = pre.lv
				line = strings.TrimSpace(strings.TrimPrefix(line, pre.s))
				break
			}
		}
	}
	w.l.Log(level, line)
	return len(p), nil
}
