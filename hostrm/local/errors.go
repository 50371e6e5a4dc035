package local

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// kindError is an error whose message reads well on its own ("fence world/3
// of job X: ranks 4-7 (node vm-1) did not arrive in 30s") while errors.Is
// still finds the plugin sentinel it belongs to.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// errorf builds a kindError: kind is a plugin sentinel, the message is
// formatted without it.
func errorf(kind error, format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// rankList formats ranks (sorted ascending) as "rank 9" or "ranks 4-7,9".
func rankList(ranks []int32) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(int(ranks[0]))
	}
	return "ranks " + compressRanks(ranks)
}

// compressRanks formats sorted ranks as ranges: "0-3,7,9-10".
func compressRanks(ranks []int32) string {
	var b strings.Builder
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ranks[i])))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(ranks[j])))
		}
		i = j + 1
	}
	return b.String()
}

// roundDuration keeps time-out messages short: "30s", "1.5s", "120ms".
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}
