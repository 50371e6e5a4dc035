package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func runBench(t *testing.T, args ...string) (string, *report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var out, errb bytes.Buffer
	code := run(ctx, append(args, "-json", jsonPath), &out, &errb)
	if code != 0 {
		t.Fatalf("bench exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, b)
	}
	t.Logf("bench output:\n%s", out.String())
	return out.String(), &rep
}

// TestQuickHydra is the smoke run `make bench` relies on: hydra only, each
// section present with a measured row per size, and the JSON agrees.
func TestQuickHydra(t *testing.T) {
	out, rep := runBench(t, "-quick", "-launcher", "hydra=mpiexec.hydra -n {n}")
	for _, re := range []string{
		`(?m)^\(a\) MPICH hello`,
		`(?m)^N\s+runs\s+hydra\s*$`,
		`(?m)^1\s+1\s+\d+\.\d \(\d+\.\d\)\s*$`,
		`(?m)^2\s+1\s+\d+\.\d \(\d+\.\d\)\s*$`,
		`(?m)^\(b\) PMI-2 microbench`,
		`(?m)^4\s+hydra\s+1\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d`,
		`(?m)^\(c\) process-manager CPU`,
		`(?m)^hello\s+1\s+-?\d+\.\d\s*$`,
		`(?m)^pmi2_bench\s+4\s+-?\d+\.\d\s*$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s", re)
		}
	}
	if strings.Contains(out, "fail") {
		t.Errorf("a hydra cell failed:\n%s", out)
	}
	want := map[string]bool{"hello/1": true, "hello/2": true, "pmi2/4": true}
	for _, c := range rep.Cells {
		key := c.Section + "/" + strconv.Itoa(c.N)
		if !want[key] || c.Launcher != "hydra" {
			t.Errorf("unexpected cell %s %s", key, c.Launcher)
			continue
		}
		delete(want, key)
		if len(c.Samples) != 1 || c.Median.WallMS <= 0 || c.Median.TreeCPUMS <= 0 {
			t.Errorf("cell %s: samples=%d median=%+v", key, len(c.Samples), c.Median)
		}
		if c.Section == "pmi2" && (c.Median.TotalUS <= 0 || c.Median.FenceUS <= 0) {
			t.Errorf("cell %s: no PMI-2 phase times: %+v", key, c.Median)
		}
	}
	if len(want) != 0 {
		t.Errorf("cells missing from JSON: %v", want)
	}
	if rep.Reference != "hydra" || rep.Params["k"] != 2 {
		t.Errorf("reference=%q params=%v", rep.Reference, rep.Params)
	}
}

// TestFailingLauncherIsReported checks that a launcher that fails is a
// "fail (reason)" cell, is not run at larger sizes, and that the ratio
// columns appear for a second launcher.
func TestFailingLauncherIsReported(t *testing.T) {
	out, rep := runBench(t, "-quick", "-pmi2", "4,8",
		"-launcher", "hydra=mpiexec.hydra -n {n}",
		"-launcher", "broken=false -n {n}")
	if !regexp.MustCompile(`(?m)^N\s+runs\s+hydra\s+broken\s+broken/hydra\s+speedup\s*$`).MatchString(out) {
		t.Errorf("no ratio columns in (a):\n%s", out)
	}
	if !strings.Contains(out, "fail (exit 1: no error output)") {
		t.Errorf("broken launcher not reported as fail (reason):\n%s", out)
	}
	for _, c := range rep.Cells {
		if c.Launcher != "broken" {
			if c.Fail != "" {
				t.Errorf("hydra cell %s N=%d failed: %s", c.Section, c.N, c.Fail)
			}
			continue
		}
		switch {
		case c.N == 8 || (c.Section == "hello" && c.N == 2):
			if !strings.HasPrefix(c.Fail, "not run: failed at N=") {
				t.Errorf("broken %s N=%d: Fail=%q, want not run", c.Section, c.N, c.Fail)
			}
		default:
			if !strings.HasPrefix(c.Fail, "exit 1") {
				t.Errorf("broken %s N=%d: Fail=%q, want exit 1", c.Section, c.N, c.Fail)
			}
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"duplicate launcher", []string{"-launcher", "a=true {n}", "-launcher", "a=true {n}"}, "given twice"},
		{"no placeholder", []string{"-launcher", "a=true"}, "no {n}"},
		{"missing command", []string{"-launcher", "a=/no/such/launcher -n {n}"}, "not found"},
		{"bad sizes", []string{"-hello", "1,x"}, "bad size"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errb bytes.Buffer
			_, err := parseFlags(tt.args, &errb)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	t.Run("default gopmi missing is a note", func(t *testing.T) {
		var errb bytes.Buffer
		cfg, err := parseFlags([]string{"-gopmi", "/no/such/gopmi"}, &errb)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.launchers) != 1 || cfg.launchers[0].Name != "hydra" {
			t.Fatalf("launchers = %v, want hydra only", cfg.launchers)
		}
		if len(cfg.notes) != 1 || !strings.Contains(cfg.notes[0], "/no/such/gopmi not found") {
			t.Fatalf("notes = %v", cfg.notes)
		}
	})
	t.Run("default gopmi present", func(t *testing.T) {
		var errb bytes.Buffer
		fake := filepath.Join(t.TempDir(), "gopmi")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseFlags([]string{"-gopmi", fake}, &errb)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.launchers) != 2 || cfg.launchers[1].String() != "gopmi="+fake+" run -n {n}" {
			t.Fatalf("launchers = %v", cfg.launchers)
		}
	})
}

func TestRunsFor(t *testing.T) {
	cfg := &config{runs: 10, runsLarge: 3, warmup: 1}
	for _, tt := range []struct{ n, runs, warmup int }{{1, 10, 1}, {16, 10, 1}, {64, 3, 1}, {128, 3, 1}, {1024, 1, 0}} {
		if r, w := cfg.runsFor(tt.n); r != tt.runs || w != tt.warmup {
			t.Errorf("runsFor(%d) = %d, %d; want %d, %d", tt.n, r, w, tt.runs, tt.warmup)
		}
	}
	if m := median([]float64{5, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v, want 2.5", m)
	}
}
