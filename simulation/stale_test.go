package simulation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// What a user holds across a restart inside one process, and what a
// handler does in place.
//
// A handover stops the informer and starts a new one on the same open
// file, as a controller does that loses its leader lease and wins it back,
// or a manager restarted in the process. The stopped informer's Run closes
// its collection, which the new informer opens again on the same DB. The
// user may still hold the old informer, its checkpoint (closed or not) and
// its indexer; a stale-calls step calls them. Every call that writes or
// needs the file must fail with persist.ErrClosed, and change nothing the
// new instance owns: the checkpoint model, which does not hear of them,
// cross-checks the file at the next stop.
//
// A checkpoint's handler may acknowledge as it is given objects, from the
// handler itself (AckInHandler), as a handler does that does its work in
// place rather than through a queue: during a cold list, a warm walk and a
// recovery too, before the informer is synced.

// staleHandles are what a user kept of an informer a handover replaced.
type staleHandles struct {
	inf *bcache.Informer
	// cp is the old checkpoint, closed or left open by the user; nil if
	// the run has none. given are objects its handler was given.
	cp    *bcache.Checkpoint
	given []interface{}
}

// handover stops the informer, keeping the file open, and starts a new one
// on it; closeCheckpoint: the user closes the old checkpoint first. A crash
// image pending before or during it is a process that died meanwhile.
func (d *driver) handover(closeCheckpoint bool) error {
	if d.crashPending() {
		return d.crashRestart()
	}
	if err := d.violations(); err != nil {
		return err
	}
	old := &staleHandles{inf: d.inf, cp: d.cp}
	if d.cpRec != nil {
		d.cpRec.mu.Lock()
		for _, g := range d.cpRec.given {
			for _, p := range g {
				old.given = append(old.given, p)
			}
		}
		d.cpRec.mu.Unlock()
	}
	d.cancel()
	d.srv.CloseHolds()
	<-d.done
	d.stopClock()
	d.diffStop()
	if closeCheckpoint && d.cp != nil {
		d.cp.Close()
	}
	// RunWithContext flushed and closed the collection; the flush below
	// makes what the model recorded durable as the closed file's is.
	ctx, cancel := context.WithTimeout(context.Background(), d.env.Timeout)
	defer cancel()
	flushErr := d.db.Flush(ctx)
	d.weak.snapshots.Wait()
	if d.crashPending() {
		// The process died during the handover.
		return d.crashRestart()
	}
	if flushErr != nil {
		return fmt.Errorf("flush after the informer stopped: %w", flushErr)
	}
	if err := d.violations(); err != nil {
		return err
	}
	d.model.closed(true)
	d.stale = old
	d.inf, d.cp, d.cpRec = nil, nil, nil
	d.logf("    the informer stopped; a new one starts on the open file (old checkpoint closed=%v)", closeCheckpoint)
	if err := d.startInformer(true, true); err != nil {
		return err
	}
	return nil
}

// staleCalls calls what the user kept of a replaced informer. Each call
// that writes or reads the file must fail with persist.ErrClosed: another
// instance owns the collection now (persist's Collection.Close).
func (d *driver) staleCalls() error {
	st := d.stale
	if st == nil {
		return nil
	}
	var bad []string
	closed := func(what string, err error) {
		switch {
		case err == nil:
			bad = append(bad, what+" succeeded")
		case !errors.Is(err, persist.ErrClosed):
			bad = append(bad, fmt.Sprintf("%s failed with %q, not persist.ErrClosed", what, err))
		}
	}
	for _, name := range []string{"sim", "sim-stale"} {
		cp, err := st.inf.Checkpoint(name)
		if err == nil {
			cp.Close()
		}
		closed(fmt.Sprintf("Checkpoint(%q) of the stopped informer", name), err)
	}
	if st.cp != nil {
		for i, obj := range st.given {
			if i >= 3 {
				break
			}
			closed("Ack of the stopped informer's checkpoint", st.cp.Ack(obj))
		}
		closed("AckDeleted of the stopped informer's checkpoint", st.cp.AckDeleted("a/p0"))
		closed("Clear of the stopped informer's checkpoint", st.cp.Clear())
	}
	if _, err := st.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err == nil {
		bad = append(bad, "AddEventHandler of the stopped informer succeeded")
	}
	// The stopped informer's indexer answers from what it held, or fails
	// with ErrClosed; never with another instance's state or another error.
	// A store that owed a list when it stopped (a set-aside) fails reads
	// with ErrIncomplete instead, as cache/errors.go documents.
	idx := st.inf.GetIndexer()
	for _, key := range d.srv.Keys() {
		obj, _, err := idx.GetByKey(key)
		if errors.Is(err, bcache.ErrIncomplete) {
			continue
		}
		if err != nil {
			closed("GetByKey "+key+" of the stopped informer's indexer", err)
			continue
		}
		if p, ok := obj.(*corev1.Pod); ok {
			if v := d.srv.stateOf(key, p); v != "" {
				bad = append(bad, fmt.Sprintf("GetByKey %s of the stopped informer's indexer: %s", key, v))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("a handle kept from before a restart in the process: %s", strings.Join(bad, "; "))
	}
	d.logf("    the stopped informer's handles refuse the file")
	return nil
}

// stateOf says why p is not a state the server wrote for key; "" if it is.
func (s *Server) stateOf(key string, p *corev1.Pod) string {
	var rv int64
	if _, err := fmt.Sscan(p.ResourceVersion, &rv); err != nil {
		return fmt.Sprintf("resourceVersion %q", p.ResourceVersion)
	}
	if st, ok := s.StateAt(rv); !ok || st.Key != key || st.UID != p.UID || st.Deleted {
		return fmt.Sprintf("%s@%d is not a state the server wrote for the key", p.UID, rv)
	}
	return ""
}

// ackInHandler returns the in-place acknowledgement of the checkpoint's
// handler r. An Ack after its informer stopped fails with ErrClosed: the
// handler ran on while the informer's Run returned.
func (d *driver) ackInHandler(cp *bcache.Checkpoint, r *recorder) func(obj interface{}) {
	return func(obj interface{}) {
		if err := cp.Ack(obj); err != nil {
			if !errors.Is(err, persist.ErrClosed) {
				r.mu.Lock()
				r.violate("Ack in the handler of %s: %v", ackString(obj), err)
				r.mu.Unlock()
			}
			return
		}
		d.model.ack(obj)
	}
}

// errorSeen checks an error the informer gave its watch error handler. A
// failure never wraps io.EOF: that is how a stream that closed normally
// ends, and a handler (client-go's default among them) skips it. A body
// cut short is io.ErrUnexpectedEOF.
func (d *driver) errorSeen(err error) {
	if msg := err.Error(); strings.Contains(msg, "set aside") || strings.Contains(msg, "set the records aside") {
		d.setAside.Store(true)
	}
	if errors.Is(err, io.EOF) {
		select {
		case d.handlerErrs <- fmt.Sprintf("the watch error handler was given a failure that wraps io.EOF, which reads as a stream that closed normally: %v", err):
		default:
		}
	}
}
