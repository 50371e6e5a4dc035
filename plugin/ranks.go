package plugin

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// RankList names ranks for a message, as the contract asks a time-out to
// name who did not arrive: "rank 9", "ranks 4-7,9", "no ranks".
func RankList(ranks []int32) string {
	switch len(ranks) {
	case 0:
		return "no ranks"
	case 1:
		return "rank " + strconv.Itoa(int(ranks[0]))
	}
	s := slices.Clone(ranks)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	b.WriteString("ranks ")
	for i := 0; i < len(s); {
		k := i
		for k+1 < len(s) && s[k+1] == s[k]+1 {
			k++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(s[i])))
		if k > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(s[k])))
		}
		i = k + 1
	}
	return b.String()
}

// RoundDuration keeps a time-out in a message short, as the contract's
// messages name it: whole seconds from 10 s, tenths from 1 s,
// milliseconds below ("30s", "1.5s", "120ms").
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}
