package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Under gopmi run the ranks' output reaches gopmi run's stdout and stderr
// a whole line at a time: ranks that each write a line in two writes with
// a pause between (Python's print with PYTHONUNBUFFERED=1 does) never cut
// into each other's lines; -l begins each line with "[rank] "; bytes that
// are not text pass unchanged; a partial line (a prompt) shows before the
// task ends; stdin goes to rank 0 alone.
func TestOutputWholeLines(t *testing.T) {
	begin(t)
	const ranks, lines = 8, 20
	twoWrites := fmt.Sprintf(`for i in $(seq %d); do printf "rank-$PMI_RANK-line-$i"; sleep 0.002; printf -- "-end\n"; done`, lines)
	whole := regexp.MustCompile(`^rank-\d+-line-\d+-end$`)
	for _, label := range []bool{false, true} {
		t.Run(fmt.Sprintf("label=%v", label), func(t *testing.T) {
			args := []string{"-n", fmt.Sprint(ranks), "sh", "-c", twoWrites}
			if label {
				args = append([]string{"-l"}, args...)
			}
			r := gopmiRun(t, runOpts{}, args...)
			if r.ExitCode != 0 {
				t.Fatalf("%s", output(r))
			}
			got := strings.Split(strings.TrimSuffix(r.Stdout, "\n"), "\n")
			if len(got) != ranks*lines {
				t.Fatalf("%d lines, want %d:\n%s", len(got), ranks*lines, r.Stdout)
			}
			for _, l := range got {
				if label {
					var rank int
					if _, err := fmt.Sscanf(l, "[%d] ", &rank); err != nil || !strings.HasPrefix(l, fmt.Sprintf("[%d] rank-%d-", rank, rank)) {
						t.Fatalf("line %q does not begin with its rank's label", l)
					}
					l = l[strings.IndexByte(l, ' ')+1:]
				}
				if !whole.MatchString(l) {
					t.Fatalf("a line was cut: %q\n%s", l, r.Stdout)
				}
			}
		})
	}

	t.Run("binary", func(t *testing.T) {
		r := gopmiRun(t, runOpts{}, "-n", "1", "sh", "-c", `printf 'a\000b\377\nno newline at the end'`)
		if want := "a\x00b\xff\nno newline at the end"; r.Stdout != want {
			t.Fatalf("stdout %q, want %q", r.Stdout, want)
		}
	})

	t.Run("partial line shows", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		argv := gopmiArgv("-n", "1", "sh", "-c", `printf 'name? '; sleep 3; echo done`)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		prompt := make([]byte, len("name? "))
		if _, err := bufio.NewReader(out).Read(prompt); err != nil || string(prompt) != "name? " {
			t.Fatalf("read %q, %v", prompt, err)
		}
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("the partial line showed after %s, once the task was about to end", d)
		}
	})

	t.Run("stdin to rank 0", func(t *testing.T) {
		argv := gopmiArgv("-n", "2", "sh", "-c", `read x; echo "rank $PMI_RANK read [$x]"`)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin = strings.NewReader("hello\n")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %s", err, stdout.String())
		}
		for _, want := range []string{"rank 0 read [hello]\n", "rank 1 read []\n"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout lacks %q: %q", want, stdout.String())
			}
		}
	})
}
