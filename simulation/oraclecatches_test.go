package simulation

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"
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

// A warm start hands each stored object to the handlers registered before
// it as OnAdd(obj, true), and a checkpoint skips that initial add where it
// acknowledged the state (design brief, warm start 2 and 7). The recorder
// checks the skip only for adds that say isInInitialList: a warm start
// that hands the stored state out as OnAdd(obj, false) both breaks the
// flag and bypasses the skip, and the recorder accepts it. Only a watch
// event can be a non-initial add, and none wrote the key since the start.
func TestRecorderRejectsAWarmStartsNonInitialAddOfADurableAck(t *testing.T) {
	srv := NewServer(ServerOptions{Window: 10})
	srv.Create("a/p4", 1)
	p := srv.Pods()["a/p4"]
	st := ckStart{
		durable: map[string]string{"a/p4": p.ResourceVersion},
		view:    map[string]Version{"a/p4": {UID: p.UID, RV: p.ResourceVersion}},
		maybe:   map[string]bool{},
	}
	r := newCheckpointRecorder("checkpoint", srv, st)
	r.OnAdd(p, false) // the warm walk's add, neither initial nor skipped
	if v := r.takeViolations(); len(v) == 0 {
		t.Errorf("the checkpoint's handler was given the stored, durably acknowledged a/p4@%s again as a non-initial add at a warm start, and the recorder accepted it", p.ResourceVersion)
	}
}

// AckDeleted settles a tombstone and nothing else (persist/checkpoint.go):
// an acknowledgement of the live object the key holds now stays. The model
// lets a late AckDeleted of an earlier deletion leave nothing for a key
// acknowledged at its live state (ackStep's ckAcked case returns {s,
// none}), so a checkpoint that forgets a live key's acknowledgement on
// AckDeleted passes the cross-check after a clean stop.
func TestCkModelRejectsAnAckDeletedThatDropsALiveAck(t *testing.T) {
	srv := NewServer(ServerOptions{Window: 10})
	srv.Create("a/p4", 1)
	m := newCkModel(srv)
	m.settled()
	m.ack(srv.Pods()["a/p4"])
	m.settled()
	old := srv.Pods()["a/p4"]
	srv.Delete("a/p4")
	m.settled() // the acknowledgement became a tombstone
	srv.Create("a/p4", 2)
	m.settled()
	live := srv.Pods()["a/p4"]
	m.ack(live) // the stored state settles the tombstone and is acknowledged
	m.settled()
	// A late acknowledgement of the earlier deletion, as the handler was
	// given it: a DeletedFinalStateUnknown of the old object.
	m.ack(cache.DeletedFinalStateUnknown{Key: "a/p4", Obj: old})
	m.settled()
	m.closed(true)
	if s := m.crossCheck(map[string]string{"a/p4": live.ResourceVersion}, nil, srv.Pods(), true); s != "" {
		t.Fatalf("the correct file fails the cross-check: %s", s)
	}
	s := m.crossCheck(nil, nil, srv.Pods(), true)
	if !strings.Contains(s, "a/p4") {
		t.Errorf("a file that lost the acknowledgement of the live a/p4@%s after a clean stop passes the cross-check (the model allows %s)", live.ResourceVersion, m.baseLocked("a/p4"))
	}
}
