// Package kvs is a job's key/value store as one node sees it: the records
// local tasks put since their last fence, the blob format in which a node's
// puts travel through the backend, and the committed store every get reads.
//
// One committed store serves every task on the node, so a fence's data is
// held once per node, never once per task.
package kvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Record is one put: the rank that made it (-1 for preput and other
// entries no rank owns), the key and the value.
type Record struct {
	Rank  int32
	Key   string
	Value string
}

// ErrCorrupt reports a blob that does not decode.
var ErrCorrupt = errors.New("kvs: corrupt blob")

// AppendRecord appends r to a blob. The format is a sequence of records,
// each a zig-zag varint rank and two length-prefixed strings, so the
// concatenation of blobs is a blob: a backend may merge nodes' fence data
// by appending.
func AppendRecord(dst []byte, r Record) []byte {
	dst = binary.AppendVarint(dst, int64(r.Rank))
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendUvarint(dst, uint64(len(r.Value)))
	return append(dst, r.Value...)
}

// Decode calls fn for every record of blob in order. It stops at the first
// error fn returns, or with ErrCorrupt.
func Decode(blob []byte, fn func(Record) error) error {
	for off := 0; off < len(blob); {
		rank, n := binary.Varint(blob[off:])
		if n <= 0 {
			return fmt.Errorf("%w: bad rank at byte %d", ErrCorrupt, off)
		}
		off += n
		key, n, err := readString(blob, off)
		if err != nil {
			return err
		}
		off = n
		val, n, err := readString(blob, off)
		if err != nil {
			return err
		}
		off = n
		if err := fn(Record{Rank: int32(rank), Key: key, Value: val}); err != nil {
			return err
		}
	}
	return nil
}

func readString(blob []byte, off int) (string, int, error) {
	l, n := binary.Uvarint(blob[off:])
	if n <= 0 || l > uint64(len(blob)-off-n) {
		return "", 0, fmt.Errorf("%w: bad length at byte %d", ErrCorrupt, off)
	}
	start := off + n
	end := start + int(l)
	return string(blob[start:end]), end, nil
}

type entry struct {
	value string
	rank  int32
}

// Store is the committed KVS of one job on one node. It is not safe for
// concurrent use; the bridge holds its job lock around it.
type Store struct {
	m map[string]entry
	// sorted is every key in order, for iteration; nil once a put may
	// have changed the set.
	sorted []string
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{m: make(map[string]entry)}
}

// Put commits one entry; a later put of the same key wins.
func (s *Store) Put(r Record) {
	if _, ok := s.m[r.Key]; !ok {
		s.sorted = nil
	}
	s.m[r.Key] = entry{value: r.Value, rank: r.Rank}
}

// Delete removes every key that starts with prefix.
func (s *Store) Delete(prefix string) {
	for _, k := range slices.Clone(s.Keys(prefix)) {
		delete(s.m, k)
	}
	s.sorted = nil
}

// Keys returns the keys that start with prefix in byte order. The slice
// is the store's: do not modify it, and do not keep it past the next Put.
func (s *Store) Keys(prefix string) []string {
	if s.sorted == nil {
		s.sorted = make([]string, 0, len(s.m))
		for k := range s.m {
			s.sorted = append(s.sorted, k)
		}
		slices.Sort(s.sorted)
	}
	if prefix == "" {
		return s.sorted
	}
	i, _ := slices.BinarySearch(s.sorted, prefix)
	j := i
	for j < len(s.sorted) && strings.HasPrefix(s.sorted[j], prefix) {
		j++
	}
	return s.sorted[i:j]
}

// Commit decodes blob into the store and returns how many records it held.
// On ErrCorrupt the records before the damage are kept.
func (s *Store) Commit(blob []byte) (int, error) {
	n := 0
	err := Decode(blob, func(r Record) error {
		s.Put(r)
		n++
		return nil
	})
	return n, err
}

// Get returns the value of key and the rank that put it.
func (s *Store) Get(key string) (value string, rank int32, ok bool) {
	e, ok := s.m[key]
	return e.value, e.rank, ok
}

// AppendAll appends every committed entry to dst as a blob, in no
// particular order.
func (s *Store) AppendAll(dst []byte) []byte {
	for k, e := range s.m {
		dst = AppendRecord(dst, Record{Rank: e.rank, Key: k, Value: e.value})
	}
	return dst
}
