package kerneltest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers, for capturing a
// kernel's logs in tests (tasks log from their own goroutines).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
