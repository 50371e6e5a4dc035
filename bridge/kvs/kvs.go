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
	"unsafe"
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

// decodeString is Decode over a string: the records' keys and values are
// substrings of blob.
func decodeString(blob string, fn func(Record) error) error {
	for off := 0; off < len(blob); {
		u, n := uvarint(blob[off:])
		if n <= 0 {
			return fmt.Errorf("%w: bad rank at byte %d", ErrCorrupt, off)
		}
		rank := int64(u >> 1) // zig-zag, as binary.AppendVarint writes it
		if u&1 != 0 {
			rank = ^rank
		}
		off += n
		var key, val string
		var err error
		if key, off, err = substring(blob, off); err != nil {
			return err
		}
		if val, off, err = substring(blob, off); err != nil {
			return err
		}
		if err := fn(Record{Rank: int32(rank), Key: key, Value: val}); err != nil {
			return err
		}
	}
	return nil
}

func substring(blob string, off int) (string, int, error) {
	l, n := uvarint(blob[off:])
	if n <= 0 || l > uint64(len(blob)-off-n) {
		return "", 0, fmt.Errorf("%w: bad length at byte %d", ErrCorrupt, off)
	}
	start := off + n
	return blob[start : start+int(l)], start + int(l), nil
}

// uvarint is binary.Uvarint over a string.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				return 0, -(i + 1) // overflow
			}
			return x | uint64(b)<<shift, i + 1
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, 0
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

// Commit decodes blob into the store and returns how many records it
// held. The store keeps one copy of the blob, which its entries share: no
// allocation per key. On ErrCorrupt the records before the damage are
// kept.
func (s *Store) Commit(blob []byte) (int, error) {
	return s.commit(string(blob))
}

// CommitOwned commits a buffer's chunks without copying them: the store's
// entries point into them, so the caller gives them up and must never
// write to them again.
func (s *Store) CommitOwned(b *Buffer) (int, error) {
	total := 0
	for _, c := range b.chunks {
		if len(c) == 0 {
			continue
		}
		if slack := cap(c) - len(c); slack > 4096 && slack > len(c)/4 {
			// The store keeps what it points into: not the room a
			// chunk had left.
			c = append([]byte(nil), c...)
		}
		n, err := s.commit(unsafe.String(unsafe.SliceData(c), len(c)))
		total += n
		if err != nil {
			return total, err
		}
	}
	*b = Buffer{}
	return total, nil
}

func (s *Store) commit(blob string) (int, error) {
	n := 0
	err := decodeString(blob, func(r Record) error {
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

// Buffer accumulates records in chunks that are never reallocated: a
// rank's puts are held once however many there are, not copied each time
// the buffer grows, and a fence on one node hands them to the store
// without a copy (Store.CommitOwned). A record is never split across
// chunks, so each chunk is a blob.
type Buffer struct {
	chunks [][]byte
	size   int
}

const (
	minChunk = 256
	maxChunk = 1 << 20
)

// Append adds one record.
func (b *Buffer) Append(r Record) {
	n := RecordSize(r)
	c := b.room(n)
	*c = AppendRecord(*c, r)
	b.size += n
}

// AppendBlob adds a blob of whole records.
func (b *Buffer) AppendBlob(blob []byte) {
	if len(blob) == 0 {
		return
	}
	c := b.room(len(blob))
	*c = append(*c, blob...)
	b.size += len(blob)
}

// Move appends other's chunks to b without copying them and empties
// other.
func (b *Buffer) Move(other *Buffer) {
	b.chunks = append(b.chunks, other.chunks...)
	b.size += other.size
	*other = Buffer{}
}

// Len is the size of the records in bytes.
func (b *Buffer) Len() int { return b.size }

// Bytes returns the records as one blob: the only chunk, or a copy of
// them all.
func (b *Buffer) Bytes() []byte {
	switch len(b.chunks) {
	case 0:
		return nil
	case 1:
		return b.chunks[0]
	}
	out := make([]byte, 0, b.size)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}

// room returns the chunk n more bytes go into, starting a new one (each
// an eighth larger than the last, up to maxChunk, or n) when the last is
// full: the room left over stays under about a ninth of what they hold.
func (b *Buffer) room(n int) *[]byte {
	k := len(b.chunks)
	if k > 0 && cap(b.chunks[k-1])-len(b.chunks[k-1]) >= n {
		return &b.chunks[k-1]
	}
	size := minChunk
	if k > 0 {
		size = min(cap(b.chunks[k-1])*9/8, maxChunk)
	}
	b.chunks = append(b.chunks, make([]byte, 0, max(size, n)))
	return &b.chunks[k]
}

// RecordSize is how many bytes AppendRecord adds for r.
func RecordSize(r Record) int {
	return varintLen(int64(r.Rank)) + uvarintLen(uint64(len(r.Key))) + len(r.Key) + uvarintLen(uint64(len(r.Value))) + len(r.Value)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}
