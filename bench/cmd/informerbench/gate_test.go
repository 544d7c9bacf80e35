package main

import (
	"bytes"
	"io"
	"testing"
	"testing/synctest"
	"time"
)

// TestWatchGate checks that a held body hands out nothing, buffers what the
// network delivers, and after release yields it all, in order, then EOF.
func TestWatchGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newWatchGate()
		pr, pw := io.Pipe()
		body := g.wrap(pr)

		go pw.Write([]byte("before|"))
		buf := make([]byte, 7)
		if _, err := io.ReadFull(body, buf); err != nil || string(buf) != "before|" {
			t.Fatalf("pass-through read = %q, %v", buf, err)
		}

		g.hold()
		got := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(body)
			got <- b
		}()
		pw.Write([]byte("held-1|"))
		pw.Write([]byte("held-2"))
		pw.Close()
		synctest.Wait() // the reader is blocked on the gate, or has read
		select {
		case b := <-got:
			t.Fatalf("read %q while held", b)
		default:
		}
		if n, _ := g.quietFor(); n != int64(len("held-1|held-2")) {
			t.Fatalf("buffered %d bytes, want %d", n, len("held-1|held-2"))
		}
		g.release()
		if b := <-got; !bytes.Equal(b, []byte("held-1|held-2")) {
			t.Fatalf("after release read %q", b)
		}
	})
}

// TestWatchGateCloseWhileHeld checks that stopping a watch (Close) ends a
// read blocked by the gate, so an informer can always shut down.
func TestWatchGateCloseWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newWatchGate()
		pr, _ := io.Pipe()
		body := g.wrap(pr)
		g.hold()
		done := make(chan error)
		go func() {
			_, err := body.Read(make([]byte, 1))
			done <- err
		}()
		synctest.Wait() // the read is held
		body.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("read after Close returned no error")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end a held read")
		}
	})
}
