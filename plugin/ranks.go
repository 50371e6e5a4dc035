package plugin

import (
	"slices"
	"strconv"
	"strings"
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
