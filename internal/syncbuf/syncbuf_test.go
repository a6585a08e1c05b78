package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWritersAndReader: writers on other goroutines and a reader
// at once lose nothing (and, under -race as the unit tier runs, do not race:
// without the lock the detector fails this test).
func TestConcurrentWritersAndReader(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("x"))
			}
		}()
	}
	for range 50 {
		_ = b.String()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("%d bytes, want 400", len(got))
	}
	b.Reset()
	if b.String() != "" {
		t.Fatal("Reset left bytes")
	}
}
