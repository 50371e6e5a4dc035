package plugintest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that several goroutines may write and read: a
// log sink for tests whose backend, server or processes write while the
// test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
