package main

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// watchGate lets a child measure how fast an informer consumes a stream of
// watch events, rather than how fast the apiserver produces them. While
// held, every watch response body is read from the network into memory (so
// the apiserver sees a fast client and keeps its watch) but not handed to
// the informer; release lets the informer drain that backlog at its own
// speed. Until the first hold, bodies pass through untouched.
type watchGate struct {
	mu   sync.Mutex
	cond *sync.Cond
	// armed: bodies read through a buffer from now on; held: the buffer
	// is not handed out.
	armed, held bool
	buffered    int64     // bytes read into buffers so far
	lastRead    time.Time // when the network last delivered bytes
}

func newWatchGate() *watchGate {
	g := &watchGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *watchGate) hold() {
	g.mu.Lock()
	g.armed, g.held = true, true
	g.mu.Unlock()
}

func (g *watchGate) release() {
	g.mu.Lock()
	g.held = false
	g.cond.Broadcast()
	g.mu.Unlock()
}

// quietFor reports the bytes buffered so far and how long ago the network
// last delivered any.
func (g *watchGate) quietFor() (int64, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buffered, time.Since(g.lastRead)
}

func (g *watchGate) wrap(body io.ReadCloser) io.ReadCloser { return &gatedBody{g: g, src: body} }

// gatedBody is one watch response body. Read is called by one goroutine
// (the watch decoder); once the gate is armed, a pump goroutine is the only
// reader of src. buf, err and closed are guarded by g.mu.
type gatedBody struct {
	g       *watchGate
	src     io.ReadCloser
	pumping bool // only touched by Read

	buf    bytes.Buffer
	err    error
	closed bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	g := b.g
	g.mu.Lock()
	if !g.armed && !b.pumping {
		g.mu.Unlock()
		return b.src.Read(p)
	}
	if !b.pumping {
		b.pumping = true
		go b.pump()
	}
	defer g.mu.Unlock()
	for !b.closed && (g.held || (b.buf.Len() == 0 && b.err == nil)) {
		g.cond.Wait()
	}
	switch {
	case b.closed:
		return 0, io.ErrClosedPipe
	case b.buf.Len() > 0:
		return b.buf.Read(p)
	}
	return 0, b.err
}

// pump copies src into buf until src fails or ends.
func (b *gatedBody) pump() {
	chunk := make([]byte, 256<<10)
	for {
		n, err := b.src.Read(chunk)
		g := b.g
		g.mu.Lock()
		b.buf.Write(chunk[:n])
		g.buffered += int64(n)
		if n > 0 {
			g.lastRead = time.Now()
		}
		if err != nil {
			b.err = err
		}
		g.cond.Broadcast()
		g.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (b *gatedBody) Close() error {
	b.g.mu.Lock()
	b.closed = true
	b.g.cond.Broadcast()
	b.g.mu.Unlock()
	return b.src.Close()
}
