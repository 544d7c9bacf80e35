package recovery

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/internal/testing/reflectortest"
)

// history is a server's sequence of events, one per resourceVersion from
// 1: events[i] happened at resourceVersion i+1.
type history struct {
	events []historyEvent
}

type historyEvent struct {
	t   watch.EventType
	pod *v1.Pod // at the event's resourceVersion
}

// randomHistory makes n events on a few keys: creations of absent keys
// (each with a new UID), and updates and deletions of present ones.
func randomHistory(rng *rand.Rand, n int) *history {
	h := &history{}
	live := map[string]*v1.Pod{}
	uids := 0
	for rv := 1; rv <= n; rv++ {
		name := fmt.Sprintf("k%d", rng.IntN(5))
		old, ok := live[name]
		var e historyEvent
		switch {
		case !ok:
			uids++
			e = historyEvent{watch.Added, upod("ns", name, fmt.Sprintf("u%d", uids), strconv.Itoa(rv))}
		case rng.IntN(10) < 7:
			e = historyEvent{watch.Modified, upod("ns", name, string(old.UID), strconv.Itoa(rv))}
		default:
			e = historyEvent{watch.Deleted, upod("ns", name, string(old.UID), strconv.Itoa(rv))}
		}
		if e.t == watch.Deleted {
			delete(live, name)
		} else {
			live[name] = e.pod
		}
		h.events = append(h.events, e)
	}
	return h
}

// at returns the collection at resourceVersion rv, by key.
func (h *history) at(rv int) map[string]*v1.Pod {
	out := map[string]*v1.Pod{}
	for _, e := range h.events[:rv] {
		key := "ns/" + e.pod.Name
		if e.t == watch.Deleted {
			delete(out, key)
		} else {
			out[key] = e.pod
		}
	}
	return out
}

// uid returns the UID of the object the event at rv is about.
func (h *history) uid(rv int) string { return string(h.events[rv-1].pod.UID) }

// versions returns key → resourceVersion of pods.
func versions(pods map[string]*v1.Pod) map[string]string {
	out := make(map[string]string, len(pods))
	for k, p := range pods {
		out[k] = p.ResourceVersion
	}
	return out
}

// A generator of recoveries against a server whose history is random. The
// store holds the collection at the reflector's resourceVersion W, except
// for objects an earlier recovery that did not finish fetched later. The
// metadata list is served at some L from W on, by a lagging apiserver. The
// fetches are served at the newest version N. The watch from L brings
// every event up to N. Every recovery must converge on the collection at
// N, and the store must see:
//   - every key move forward, with no add, update or deletion at a
//     resourceVersion not newer than the key's last;
//   - no object deleted and then given back, its UID added after a
//     tombstone;
//   - the recovery end at E only with the store holding the collection at E.
func TestRecoveryRandomHistories(t *testing.T) {
	for seed := range 300 {
		t.Run(strconv.Itoa(seed), func(t *testing.T) { checkRandomRecovery(t, uint64(seed)) })
	}
}

func checkRandomRecovery(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	const n = 30
	h := randomHistory(rng, n)
	w := 1 + rng.IntN(n)     // the reflector's resourceVersion
	l := w + rng.IntN(n-w+1) // the list's: not older than w
	stored := h.at(w)
	ahead := map[string]int{} // key → the version an earlier fetch read it at
	for _, key := range slices.Sorted(maps.Keys(h.at(n))) {
		if rng.IntN(3) == 0 && w < n {
			ahead[key] = w + 1 + rng.IntN(n-w)
		}
	}
	for key, at := range ahead {
		if p, ok := h.at(at)[key]; ok {
			stored[key] = p
		}
	}
	describe := func() string {
		var b strings.Builder
		for i, e := range h.events {
			fmt.Fprintf(&b, " %d:%s %s/%s", i+1, e.t, e.pod.Name, e.pod.UID)
		}
		return fmt.Sprintf("seed %d: W=%d L=%d ahead=%v stored=%v\nhistory:%s", seed, w, l, ahead, versions(stored), b.String())
	}

	var pods []*v1.Pod
	for _, p := range stored {
		pods = append(pods, p)
	}
	store := newFakeStore(pods...)
	listed := slices.Collect(maps.Values(h.at(l)))
	now := slices.Collect(maps.Values(h.at(n)))
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList(strconv.Itoa(l), listed...), nil
		},
		objects: server(strconv.Itoa(n), now...),
	}
	rh := startRecovery(t, store, lister, strconv.Itoa(w), func(o *testOptions, _ *reflectortest.ScriptedLW) {
		if rng.IntN(2) == 0 {
			o.Recovery.FullListFraction = 0.01 // one fetch of the collection
		}
	})
	watcher := rh.lw.Watcher(t, 0)
	for _, e := range h.events[l:] {
		watcher.Action(e.t, e.pod)
	}
	watcher.Action(watch.Bookmark, upod("", "", "", strconv.Itoa(n)))
	store.waitFor(t, "bookmark@"+strconv.Itoa(n))
	poll.Until(t, 5*time.Second, "the recovery's end", func() bool {
		return slices.ContainsFunc(store.Calls(), func(c string) bool { return strings.HasPrefix(c, "end@") })
	})
	rh.stop()

	cur := versions(stored)
	tombstoned := map[string]string{} // key → UID told deleted
	for _, c := range store.Calls() {
		verb, rest, _ := strings.Cut(c, " ")
		key, rvText, _ := strings.Cut(rest, "@")
		switch {
		case verb == "begin":
			continue
		case strings.HasPrefix(c, "bookmark@"):
			continue
		case strings.HasPrefix(c, "end@"):
			e, _ := strconv.Atoi(strings.TrimPrefix(c, "end@"))
			if want := versions(h.at(e)); !maps.Equal(cur, want) {
				t.Fatalf("%s\nthe recovery ended at %d with the store at %v, want %v\ncalls %v", describe(), e, cur, want, store.Calls())
			}
			continue
		}
		rv, _ := strconv.Atoi(rvText)
		last, had := cur[key]
		lastN, _ := strconv.Atoi(last)
		switch {
		case strings.HasPrefix(key, "tombstone:"):
			key = strings.TrimPrefix(key, "tombstone:")
			tombstoned[key] = h.uid(rv)
			delete(cur, key)
		case verb == "delete":
			if !had || rv <= lastN {
				t.Fatalf("%s\n%q: the store held %s@%q\ncalls %v", describe(), c, key, last, store.Calls())
			}
			delete(cur, key)
		default:
			if had && rv <= lastN {
				t.Fatalf("%s\n%q went backwards from %s\ncalls %v", describe(), c, last, store.Calls())
			}
			if u, ok := tombstoned[key]; ok && u == h.uid(rv) {
				t.Fatalf("%s\n%q after a tombstone of the same object (UID %s)\ncalls %v", describe(), c, u, store.Calls())
			}
			cur[key] = rvText
		}
	}
	if want := versions(h.at(n)); !maps.Equal(cur, want) {
		t.Fatalf("%s\nthe store holds %v, want %v\ncalls %v", describe(), cur, want, store.Calls())
	}
}
