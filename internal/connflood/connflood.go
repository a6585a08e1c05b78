// Package connflood holds connections open to an HTTP server the way a
// hostile local process would, for the tests and the soak that show evictd's
// metrics server cannot be starved (docs/reliability.md): idle keep-alive
// connections (one request answered, then nothing) and slow ones (a header
// line every 500 ms, never the blank line that ends the headers), each
// dialled again as soon as the server closes it.
package connflood

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Flood holds idle and slow connections to addr until Stop.
type Flood struct {
	dials atomic.Int64
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// Start starts the flood.
func Start(addr string, idle, slow int) *Flood {
	f := &Flood{done: make(chan struct{})}
	for i := 0; i < idle+slow; i++ {
		f.wg.Add(1)
		go func(slowConn bool) { defer f.wg.Done(); f.hold(addr, slowConn) }(i >= idle)
	}
	return f
}

// Dials is how many connections were made so far.
func (f *Flood) Dials() int64 { return f.dials.Load() }

// Stop closes every connection and waits for the flood to end.
func (f *Flood) Stop() {
	f.once.Do(func() { close(f.done); f.wg.Wait() })
}

func (f *Flood) hold(addr string, slowConn bool) {
	for {
		select {
		case <-f.done:
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		f.dials.Add(1)
		closed := make(chan struct{})
		go func() {
			select {
			case <-f.done:
			case <-closed:
			}
			c.Close()
		}()
		if slowConn {
			fmt.Fprint(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n")
			for {
				time.Sleep(500 * time.Millisecond)
				if _, err := fmt.Fprint(c, "X-Slow: 1\r\n"); err != nil {
					break
				}
			}
		} else {
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(c)
			if resp, err := http.ReadResponse(br, nil); err == nil {
				io.Copy(io.Discard, resp.Body)
				io.Copy(io.Discard, br) // idle until the server lets go
			}
		}
		close(closed)
	}
}
