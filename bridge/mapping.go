package bridge

import (
	"strconv"
	"strings"
)

// processMapping renders PMI_process_mapping in RFC 13's vector form:
// (vector,(first_node,node_count,ranks_per_node),...), one block per run
// of consecutive nodes that take the same number of consecutive ranks.
// When the text would not fit in maxLen it returns "", as RFC 13 asks,
// and clients fall back to exchanging hostnames.
func processMapping(rankNode []int32, maxLen int) string {
	type run struct{ node, count int32 }
	var runs []run
	for _, n := range rankNode {
		if k := len(runs); k > 0 && runs[k-1].node == n {
			runs[k-1].count++
			continue
		}
		runs = append(runs, run{node: n, count: 1})
	}
	var b strings.Builder
	b.WriteString("(vector")
	for i := 0; i < len(runs); {
		start, count := runs[i].node, runs[i].count
		j := i + 1
		for j < len(runs) && runs[j].count == count && runs[j].node == runs[j-1].node+1 {
			j++
		}
		b.WriteString(",(")
		b.WriteString(strconv.Itoa(int(start)))
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(j - i))
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(int(count)))
		b.WriteByte(')')
		if b.Len() > maxLen {
			return ""
		}
		i = j
	}
	b.WriteByte(')')
	if b.Len() > maxLen {
		return ""
	}
	return b.String()
}
