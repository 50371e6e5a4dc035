package bridge

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gopmi/gopmi/bridge/kvs"
	"github.com/gopmi/gopmi/bridge/wire"
)

// ringEntry is one rank's PMIX_Ring contribution.
type ringEntry struct {
	count       int
	left, right string
}

const ringKey = "\x00ring"

// ring is Slurm's PMIX_Ring: a scan over the job in rank order. Each rank
// gives a count and its left and right values; it gets back the sum of
// the counts before it, the right value of its left neighbour and the left
// value of its right neighbour (wrapping).
func (s *Session) ring(r *request, m *wire.Message) {
	count, err := strconv.Atoi(m.Value("ring-count"))
	if err != nil || count < 0 {
		r.fail(wire.RcInvalidArg, fmt.Errorf("ring: bad ring-count=%q", m.Value("ring-count")))
		return
	}
	v := strconv.Itoa(count) + "\x00" + m.Value("ring-left") + "\x00" + m.Value("ring-right")
	rec := kvs.AppendRecord(nil, kvs.Record{Rank: s.rank, Key: ringKey, Value: v})
	g := s.j.worldGroup()
	g.name = ringName
	s.j.enterCollective(r, g, false, nil, rec)
}

func decodeRing(blob []byte) (map[int32]ringEntry, error) {
	out := make(map[int32]ringEntry)
	err := kvs.Decode(blob, func(rec kvs.Record) error {
		if rec.Key != ringKey {
			return nil
		}
		parts := strings.SplitN(rec.Value, "\x00", 3)
		if len(parts) != 3 {
			return fmt.Errorf("ring: bad contribution from rank %d", rec.Rank)
		}
		n, err := strconv.Atoi(parts[0])
		if err != nil {
			return fmt.Errorf("ring: bad count from rank %d", rec.Rank)
		}
		out[rec.Rank] = ringEntry{count: n, left: parts[1], right: parts[2]}
		return nil
	})
	return out, err
}

func (j *Job) answerRing(r *request, ring map[int32]ringEntry) {
	size := j.cfg.Job.Size
	if int32(len(ring)) != size {
		r.fail(wire.RcFail, fmt.Errorf("ring: %d of %d ranks contributed", len(ring), size))
		return
	}
	before := 0
	for q := int32(0); q < r.rank; q++ {
		before += ring[q].count
	}
	left := ring[(r.rank-1+size)%size].right
	right := ring[(r.rank+1)%size].left
	r.ok("ring-count", strconv.Itoa(before), "ring-left", left, "ring-right", right)
}
