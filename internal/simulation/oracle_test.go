package simulation

import (
	"strconv"
	"testing"
)

// A handler told of a watch deletion may acknowledge it, at the deletion's
// version, before the settled point that follows. persist has made a
// tombstone of the key's earlier acknowledgement when it applied the
// deletion, and that Ack settles it (persist/checkpoint.go): the file
// holds nothing for the key. The model records the tombstone only at the
// settled point after the Ack, and allowed only the tombstone (seed 4,
// under I/O load, where the deletion reached the handler before the step
// that acknowledged it). A deletion that came by list is no Ack at its
// version, and leaves the tombstone.
func TestCkModelAckAtADeletionsVersionSettlesItsTombstone(t *testing.T) {
	srv := NewServer(ServerOptions{Window: 10})
	srv.Create("a/p4", 1)
	m := newCkModel(srv)
	m.settled()
	live := srv.Pods()["a/p4"]
	m.ack(live)
	m.settled()
	srv.Delete("a/p4") // a step that does not wait: no settled point
	deleted := live.DeepCopy()
	deleted.ResourceVersion = strconv.FormatInt(srv.Revision(), 10)
	m.ack(deleted)
	m.settled()
	m.closed(true)
	for _, c := range []struct {
		what       string
		tombstones []string
	}{
		{"the Ack settled the tombstone", nil},
		{"the tombstone stayed", []string{"a/p4"}},
	} {
		if s := m.crossCheck(nil, c.tombstones, srv.Pods(), true); s != "" {
			t.Errorf("%s: %s", c.what, s)
		}
	}
}
