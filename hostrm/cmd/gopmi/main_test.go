package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rs/zerolog"

	"github.com/gopmi/gopmi/hostrm/local"
	"github.com/gopmi/gopmi/hostrm/local/launcher"
	"github.com/gopmi/gopmi/plugin/plugintest"
)

func TestParseRun(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want launcher.Config
		err  string
	}{
		{
			name: "defaults",
			args: []string{"./a.out", "-x", "y"},
			want: launcher.Config{PMIxAuto: true,
				Apps:      []local.AppSpec{{Path: "./a.out", Args: []string{"-x", "y"}, Procs: 1}},
				FenceMode: "collect", FenceTimeout: launcher.DefaultFenceTimeout, StartTimeout: launcher.DefaultStartTimeout,
				MaxVal: 1024, LogLevel: "warn",
			},
		},
		{
			name: "flags",
			args: []string{"-n", "8", "-ppn", "2", "-pmi-port", "-usize", "16", "-fence-mode", "modex", "-timeout", "30s",
				"-max-val", "4096", "-log-level", "debug", "-wdir", "/tmp", "-env", "A=1", "-genv", "B", "2", "prog"},
			want: launcher.Config{PMIxAuto: true,
				Apps: []local.AppSpec{{Path: "prog", Args: []string{}, Procs: 8, Env: []string{"A=1"}}},
				PPN:  2, PMIPort: true, UniverseSize: 16, FenceMode: "modex", FenceTimeout: 30 * time.Second,
				StartTimeout: launcher.DefaultStartTimeout, MaxVal: 4096, LogLevel: "debug", Wdir: "/tmp", Env: []string{"B=2"},
			},
		},
		{
			name: "mpmd",
			args: []string{"-np", "2", "-env", "A=1", "-genv", "G=1", "a", "x", ":", "-n", "3", "-env", "C", "3", "-wdir", "/w", "b", "-n", "9"},
			want: launcher.Config{PMIxAuto: true,
				Env: []string{"G=1"},
				Apps: []local.AppSpec{
					{Path: "a", Args: []string{"x"}, Procs: 2, Env: []string{"A=1"}},
					{Path: "b", Args: []string{"-n", "9"}, Procs: 3, Env: []string{"C=3"}, Dir: "/w"},
				},
				FenceMode: "collect", FenceTimeout: launcher.DefaultFenceTimeout, StartTimeout: launcher.DefaultStartTimeout,
				MaxVal: 1024, LogLevel: "warn",
			},
		},
		{name: "no program", args: []string{"-n", "2"}, err: "no program to run"},
		{name: "empty section", args: []string{"a", ":"}, err: "section 1 after ':' names no program"},
		{name: "bad n", args: []string{"-n", "0", "a"}, err: "-n 0: need at least one process"},
		{name: "bad env", args: []string{"-env", "=x", "a"}, err: `invalid value "=x" for flag -env: "=x" is not KEY=VALUE`},
		{name: "run flag after ':'", args: []string{"a", ":", "-n", "1", "-fence-mode", "lazy", "b"},
			err: "-fence-mode is for the whole run: give it before the first program, not in section 1 after ':'"},
		{name: "genv after ':'", args: []string{"a", ":", "-genv", "A=1", "b"},
			err: "-genv is for the whole run: give it before the first program, not in section 1 after ':'"},
		{name: "bad ppn", args: []string{"-ppn", "-1", "a"}, err: "-ppn -1: want 0 (one node) or more"},
		{name: "bad usize", args: []string{"-usize", "-5", "a"}, err: "-usize -5: want 0 (the job's size) or more"},
		{name: "bad timeout", args: []string{"-timeout", "-1s", "a"}, err: "-timeout and -start-timeout cannot be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, _, err := parseRun(tc.args, &stderr)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("parseRun: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRun: %v", err)
			}
			if d := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(launcher.Config{}, "Logger"), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
		})
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"version"}, 0, "gopmi dev\n", ""},
		{[]string{"help"}, 0, "usage: gopmi <command>", ""},
		{nil, 2, "", "usage: gopmi <command>"},
		{[]string{"frobnicate"}, 2, "", "gopmi: unknown command \"frobnicate\"\nusage:"},
		{[]string{"run"}, 2, "", "gopmi run: no program to run\n"},
		{[]string{"run", "-fence-mode", "eager", "x"}, 2, "", "gopmi run: -fence-mode: \"eager\" is not a fence mode; want collect, lazy or modex\n"},
		{[]string{"run", "-max-val", "10", "/bin/true"}, 2, "", "gopmi run: -max-val: 10 is below the minimum 64\n"},
		{[]string{"help", "run"}, 0, "usage: gopmi run [flags]", ""},
		{[]string{"run", "-log-level", "loud", "x"}, 2, "", `gopmi run: -log-level "loud"`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, nil, &stdout, &stderr)
			if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || !strings.HasPrefix(stderr.String(), tc.stderr) {
				t.Errorf("gopmi %v: %d\nstdout %q\nstderr %q\nwant %d, %q, %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// Log lines show the real sub-second time, not ".000" on every line: a
// line logged at hh:mm:ss.123 says .123.
func TestLogTimesHaveMilliseconds(t *testing.T) {
	at := time.Date(2026, 11, 24, 23, 5, 40, 123456789, time.Local)
	// Left set: the run's goroutines may log after it returns.
	zerolog.TimestampFunc = func() time.Time { return at }
	var stdout, stderr plugintest.Buffer // the log and the tasks' stderr share it
	if code := run([]string{"run", "-log-level", "debug", "-daemon", "none", "-n", "1", "/bin/true"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("gopmi run: %d\n%s", code, stderr.String())
	}
	lines := regexp.MustCompile(`(?m)^23:05:40\.(\d{3}) `).FindAllStringSubmatch(stderr.String(), -1)
	if len(lines) == 0 {
		t.Fatalf("no log line:\n%s", stderr.String())
	}
	for _, m := range lines {
		if m[1] != "123" {
			t.Fatalf("a line logged at 23:05:40.123 shows .%s:\n%s", m[1], stderr.String())
		}
	}
}

// GOPMI_PMIX=1 turns PMIx on; 0 keeps a program that links Open MPI from
// being served as PMIx; -pmix and -pmi-port do not go together.
func TestParsePMIx(t *testing.T) {
	for _, c := range []struct {
		env        string
		args       []string
		pmix, auto bool
		err        string
	}{
		{"", []string{"-n", "2", "a.out"}, false, true, ""},
		{"1", []string{"-n", "2", "a.out"}, true, true, ""},
		{"0", []string{"-n", "2", "a.out"}, false, false, ""},
		{"", []string{"-pmix", "-n", "2", "a.out"}, true, true, ""},
		{"", []string{"-pmix", "-pmi-port", "a.out"}, false, false, "-pmix and -pmi-port"},
	} {
		t.Setenv("GOPMI_PMIX", c.env)
		cfg, _, err := parseRun(c.args, io.Discard)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: %v; want an error saying %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || cfg.PMIx != c.pmix || cfg.PMIxAuto != c.auto {
			t.Errorf("GOPMI_PMIX=%q %v: PMIx %v, auto %v, %v; want %v, %v", c.env, c.args, cfg.PMIx, cfg.PMIxAuto, err, c.pmix, c.auto)
		}
	}
}
