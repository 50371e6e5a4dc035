package clients

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Check is one expectation on a run: nil when r meets it, else an error
// that says how r falls short.
type Check func(r Result) error

// RankCheck judges the key=value fields of one rank's line.
type RankCheck func(rank int, fields map[string]string) error

// All is every check at once; its error joins those of the checks that
// fail, so one report names every shortfall.
func All(cs ...Check) Check {
	return func(r Result) error {
		var errs []error
		for _, c := range cs {
			if err := c(r); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// ExitCode wants the launcher to exit with want, not to time out.
func ExitCode(want int) Check {
	return func(r Result) error {
		if r.TimedOut {
			return fmt.Errorf("timed out after %s, want exit %d", r.Wall.Round(time.Millisecond), want)
		}
		if r.ExitCode != want {
			return fmt.Errorf("exit code %d, want %d", r.ExitCode, want)
		}
		return nil
	}
}

// NoFail wants no "fail " line from the tasks.
func NoFail() Check {
	return func(r Result) error {
		if l := Lines(r.Stdout, "fail "); len(l) > 0 {
			return fmt.Errorf("%d fail lines, first: %s", len(l), l[0])
		}
		return nil
	}
}

// StdoutHas wants sub somewhere in stdout.
func StdoutHas(sub string) Check {
	return func(r Result) error {
		if !strings.Contains(r.Stdout, sub) {
			return fmt.Errorf("stdout lacks %q", sub)
		}
		return nil
	}
}

// StdoutLacks wants sub nowhere in stdout.
func StdoutLacks(sub string) Check {
	return func(r Result) error {
		if strings.Contains(r.Stdout, sub) {
			return fmt.Errorf("stdout has %q", sub)
		}
		return nil
	}
}

// PerRank wants exactly one line starting with prefix for each rank
// 0..n-1 (its rank= field), carrying size=n if it has a size, and each
// passing f (nil: any).
func PerRank(prefix string, n int, f RankCheck) Check {
	return PerRankWhere(prefix, n, nil, f)
}

// PerRankWhere is PerRank over the lines starting with prefix whose fields
// keep accepts (nil: all), for programs that print several lines per rank
// under one prefix.
func PerRankWhere(prefix string, n int, keep func(fields map[string]string) bool, f RankCheck) Check {
	return func(r Result) error {
		seen := make(map[int]bool, n)
		for _, l := range Lines(r.Stdout, prefix) {
			fl := Fields(l)
			if keep != nil && !keep(fl) {
				continue
			}
			rank, err := strconv.Atoi(fl["rank"])
			if err != nil || rank < 0 || rank >= n {
				return fmt.Errorf("bad rank in %q", l)
			}
			if seen[rank] {
				return fmt.Errorf("rank %d twice: %q", rank, l)
			}
			seen[rank] = true
			if s, ok := fl["size"]; ok && s != strconv.Itoa(n) {
				return fmt.Errorf("size %s, want %d: %q", s, n, l)
			}
			if f != nil {
				if err := f(rank, fl); err != nil {
					return fmt.Errorf("%w: %q", err, l)
				}
			}
		}
		if len(seen) != n {
			return fmt.Errorf("%d of %d ranks printed %q", len(seen), n, prefix)
		}
		return nil
	}
}

// FieldsAre wants the given key, value pairs among a rank's fields.
func FieldsAre(kv ...string) RankCheck {
	return func(_ int, f map[string]string) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if f[kv[i]] != kv[i+1] {
				return fmt.Errorf("%s=%s, want %s", kv[i], f[kv[i]], kv[i+1])
			}
		}
		return nil
	}
}

// Tail is the last n lines of s, with a note of how many were cut, ending
// in a newline unless empty.
func Tail(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines cut)\n", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	if out := strings.Join(lines, ""); out != "" {
		return out + "\n"
	}
	return ""
}
