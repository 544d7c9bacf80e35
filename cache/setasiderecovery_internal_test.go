package cache

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
)

// A warm start's walk that meets a record it cannot read sets aside every
// key it has not handed out (keepOnly). The store then owes a list. A
// recovery after a 410 may be under way meanwhile. One that took its diff
// before the set-aside fetches none of the dropped keys. Its end must not
// pay the debt, and must not clear the file's must-list mark. The end once
// checked the generation before it wrote, not as it wrote. A set-aside
// between the two was then paid for by an end without its keys. The
// informer synced, and its listers lacked them. A restart resumed the file
// without them, and listed nothing.
func TestRecoveryEndDoesNotPayForASetAsideItRaced(t *testing.T) {
	stored := []string{"a", "b", "c", "d", "e"}
	server := map[string]serverPod{}
	for i, name := range stored {
		server["ns/"+name] = serverPod{uid: "uid-" + name, rv: strconv.Itoa(i + 1)}
	}
	race := setAsideRace{stored: stored, server: server, serverRV: "5", drop: map[string]bool{}, at: setAsideDuringEnd}
	for _, name := range stored {
		race.drop["ns/"+name] = true
	}
	race.run(t, race.coldStart(t))
}

// TestSetAsideAgainstRecoveryGenerated draws stored collections, the
// server's changes since, and the keys a set-aside drops. The set-aside
// lands at each point of a recovery's steps in turn. It lands before,
// during and after the diff, and around the fetches. It also lands during
// and after the end. Whatever the order, a store that owes no list must
// hold the server's objects. A file without the must-list mark must hold
// them too, since a restart resumes it. The seed is logged, so a failure
// can be replayed.
func TestSetAsideAgainstRecoveryGenerated(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for n := range 4 {
		race := drawSetAsideRace(r)
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Logf("stored %v; server %v at %s; set aside %v", race.stored, race.server, race.serverRV, slices.Sorted(maps.Keys(race.drop)))
			file := race.coldStart(t)
			for at := range setAsidePoints {
				race.at = at
				t.Run(setAsidePointNames[at], func(t *testing.T) { race.run(t, file) })
			}
		})
	}
}

// setAsidePoint is where a set-aside lands among a recovery's steps.
type setAsidePoint int

const (
	setAsideBeforeDiff setAsidePoint = iota
	setAsideDuringDiff
	setAsideBeforeFetches
	setAsideAfterFetches
	setAsideDuringEnd
	setAsideAfterEnd
	setAsidePoints // how many there are
)

var setAsidePointNames = [setAsidePoints]string{
	"before the diff", "during the diff", "before the fetches", "after the fetches", "during the end", "after the end",
}

// serverPod is an object's identity on the server.
type serverPod struct {
	uid, rv string
}

// setAsideRace is one collection, stored by a cold start, and the server's
// objects when a recovery lists. The set-aside drops the keys in drop at
// the point at.
type setAsideRace struct {
	stored   []string // names, stored at resourceVersions 1, 2, ...
	server   map[string]serverPod
	serverRV string
	drop     map[string]bool
	at       setAsidePoint
}

// drawSetAsideRace draws two to seven stored Pods. Each is unchanged,
// updated, replaced by another UID or deleted on the server. A few are
// created. The set-aside drops a non-empty subset of the stored keys.
func drawSetAsideRace(r *rand.Rand) setAsideRace {
	race := setAsideRace{server: map[string]serverPod{}, drop: map[string]bool{}}
	n := 2 + r.IntN(6)
	next := 100
	for i := range n {
		name := string(rune('a' + i))
		race.stored = append(race.stored, name)
		key := "ns/" + name
		switch r.IntN(4) {
		case 0, 1:
			race.server[key] = serverPod{uid: "uid-" + name, rv: strconv.Itoa(i + 1)}
		case 2:
			race.server[key] = serverPod{uid: "uid-" + name, rv: strconv.Itoa(next)}
			next++
		case 3:
			if r.IntN(2) == 0 {
				race.server[key] = serverPod{uid: "uid-" + name + "-2", rv: strconv.Itoa(next)}
				next++
			}
		}
		if r.IntN(2) == 0 {
			race.drop[key] = true
		}
	}
	if len(race.drop) == 0 {
		race.drop["ns/"+race.stored[r.IntN(n)]] = true
	}
	for i := range r.IntN(3) {
		race.server["ns/new"+strconv.Itoa(i)] = serverPod{uid: "uid-new" + strconv.Itoa(i), rv: strconv.Itoa(next)}
		next++
	}
	race.serverRV = strconv.Itoa(next)
	return race
}

// coldStart stores the race's Pods in a cache file. It returns the file,
// whose source stays quiet from then on.
func (race setAsideRace) coldStart(t *testing.T) *storedFile {
	src := fcache.NewFakeControllerSource()
	for _, name := range race.stored {
		p := setAsidePod(name)
		p.UID = types.UID("uid-" + name)
		src.Add(p)
	}
	f := newStoredFile(t, src)
	f.coldStart(nil, len(race.stored))
	return f
}

// run starts warm on a copy of the stored file, with the walk held at its
// start. It then applies a recovery's steps as the delta loop does, and the
// set-aside at race.at, all on the test's goroutine. It checks the store
// and the file once the recovery has ended.
func (race setAsideRace) run(t *testing.T, stored *storedFile) {
	data, err := os.ReadFile(stored.path)
	if err != nil {
		t.Fatal(err)
	}
	f := newStoredFile(t, stored.src)
	if err := os.WriteFile(f.path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	walking, release := make(chan struct{}), make(chan struct{})
	walkStarting = func() { close(walking); <-release }
	defer func() { walkStarting = nil }()
	db := f.open()
	defer db.Close()
	inf := f.informer(db, nil)
	cancel, done := runInformer(inf)
	defer func() { close(release); cancel(); <-done }()
	select {
	case <-walking:
	case <-time.After(30 * time.Second):
		t.Fatal("the warm start's walk did not begin")
	}

	ctx := context.Background()
	logger := klog.Background()
	fire := func(at setAsidePoint) {
		if at != race.at {
			return
		}
		// The walk reached no key, so keepOnly's predicate is the drop.
		if err := inf.keepOnly(ctx, func(key string) bool { return !race.drop[key] }); err != nil {
			t.Fatalf("setting aside %v: %v", race.drop, err)
		}
	}
	recoveryDiffing = func() { fire(setAsideDuringDiff) }
	recoveryEnding = func() { fire(setAsideDuringEnd) }
	defer func() { recoveryDiffing, recoveryEnding = nil, nil }()

	fire(setAsideBeforeDiff)
	var fetch []string
	begin := &recoveryStep{ctx: ctx, done: make(chan error, 1), diff: func(stored map[string]recovery.Version) (recovery.Plan, error) {
		var plan recovery.Plan
		fetch, plan = race.diff(stored)
		return plan, nil
	}}
	if err := inf.handleBatchDeltas(logger, []cache.Delta{{Type: cache.Updated, Object: begin}}, false); err != nil {
		t.Fatalf("applying the recovery's begin: %v", err)
	}
	if err := <-begin.done; err != nil {
		t.Fatalf("the recovery's begin: %v", err)
	}
	fire(setAsideBeforeFetches)
	if len(fetch) > 0 {
		var fetched []cache.Delta
		for _, key := range fetch {
			fetched = append(fetched, cache.Delta{Type: cache.Updated, Object: race.pod(key)})
		}
		if err := inf.handleBatchDeltas(logger, fetched, false); err != nil {
			t.Fatalf("applying the fetched objects: %v", err)
		}
	}
	fire(setAsideAfterFetches)
	end := &recoveryStep{rv: race.serverRV}
	if err := inf.handleBatchDeltas(logger, []cache.Delta{{Type: cache.Updated, Object: end}}, false); err != nil {
		t.Fatalf("applying the recovery's end: %v", err)
	}
	fire(setAsideAfterEnd)

	versions, err := inf.persistent.coll.Versions()
	if err != nil {
		t.Fatal(err)
	}
	differs := race.differences(versions)
	if len(differs) == 0 {
		return
	}
	if !inf.gate.owes() {
		t.Errorf("set aside %s: the store owes no list, but differs from the server: %v", setAsidePointNames[race.at], differs)
	}
	if !inf.persistent.coll.MustList() {
		t.Errorf("set aside %s: the file has no must-list mark, so a restart resumes it, but it differs from the server: %v", setAsidePointNames[race.at], differs)
	}
}

// diff is a recovery's diff of the stored versions against the server. It
// returns the keys to fetch and the plan.
func (race setAsideRace) diff(stored map[string]recovery.Version) ([]string, recovery.Plan) {
	var fetch []string
	var plan recovery.Plan
	for _, key := range slices.Sorted(maps.Keys(stored)) {
		v := stored[key]
		s, ok := race.server[key]
		switch {
		case !ok || types.UID(s.uid) != v.UID:
			plan.Deleted = append(plan.Deleted, key)
		case s.rv == v.ResourceVersion:
			plan.Unchanged = append(plan.Unchanged, key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(race.server)) {
		s := race.server[key]
		if v, ok := stored[key]; !ok || types.UID(s.uid) != v.UID || s.rv != v.ResourceVersion {
			fetch = append(fetch, key)
		}
	}
	return fetch, plan
}

// pod returns the server's object at key.
func (race setAsideRace) pod(key string) *corev1.Pod {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	s := race.server[key]
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(s.uid), ResourceVersion: s.rv}}
}

// differences lists how the stored versions differ from the server's.
func (race setAsideRace) differences(stored map[string]persist.Version) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(race.server)) {
		s := race.server[key]
		switch v, ok := stored[key]; {
		case !ok:
			out = append(out, key+": missing")
		case types.UID(s.uid) != v.UID || s.rv != v.ResourceVersion:
			out = append(out, fmt.Sprintf("%s: stored %s@%s, server has %s@%s", key, v.UID, v.ResourceVersion, s.uid, s.rv))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(stored)) {
		if _, ok := race.server[key]; !ok {
			out = append(out, key+": deleted on the server")
		}
	}
	return out
}
