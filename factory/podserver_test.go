package factory_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// podAPIServer is a small apiserver of Pods in JSON. It lists in pages at
// one version, and its watch replays every event after the version asked.
// It also serves the kube-system namespace the factories read.
type podAPIServer struct {
	*httptest.Server
	mu      sync.Mutex
	changed *sync.Cond
	rv      int
	pods    map[string]*corev1.Pod
	log     []podEvent
	closed  bool
	// fullLists counts lists of Pods in pages. It leaves out the limit=1 reads
	// and metadata lists by which a warm start proves it caught up.
	fullLists int
}

type podEvent struct {
	rv  int
	typ watch.EventType
	pod *corev1.Pod
}

func newPodAPIServer(t *testing.T) *podAPIServer {
	s := &podAPIServer{rv: 1, pods: map[string]*corev1.Pod{}}
	s.changed = sync.NewCond(&s.mu)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.mu.Lock()
		s.closed = true
		s.changed.Broadcast()
		s.mu.Unlock()
		s.Close()
	})
	return s
}

func (s *podAPIServer) clientset(t *testing.T) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// apply creates, updates or deletes pod at the server's next version.
func (s *podAPIServer) apply(typ watch.EventType, pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	p := pod.DeepCopy()
	p.ResourceVersion = strconv.Itoa(s.rv)
	key := p.Namespace + "/" + p.Name
	if typ == watch.Deleted {
		delete(s.pods, key)
	} else {
		s.pods[key] = p
	}
	s.log = append(s.log, podEvent{rv: s.rv, typ: typ, pod: p})
	s.changed.Broadcast()
}

func (s *podAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case r.URL.Path == "/api/v1/namespaces/kube-system":
		writeJSON(w, &corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "parity-cluster"}})
	case r.URL.Path == "/api/v1/pods" && q.Get("watch") == "true":
		s.watch(w, r)
	case r.URL.Path == "/api/v1/pods":
		metadata := strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList")
		if l, _ := strconv.Atoi(q.Get("limit")); l != 1 && !metadata {
			s.mu.Lock()
			s.fullLists++
			s.mu.Unlock()
		}
		s.list(w, q.Get("limit"), q.Get("continue"))
	default:
		http.Error(w, "not served: "+r.URL.String(), http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, obj any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *podAPIServer) list(w http.ResponseWriter, limit, cont string) {
	s.mu.Lock()
	rv, from := s.rv, 0
	if cont != "" {
		parts := strings.SplitN(cont, "-", 2)
		rv, _ = strconv.Atoi(parts[0])
		from, _ = strconv.Atoi(parts[1])
	}
	// Pages after the first are served at the first page's version.
	pods := s.podsAt(rv)
	s.mu.Unlock()
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	list.ResourceVersion = strconv.Itoa(rv)
	n, _ := strconv.Atoi(limit)
	to := len(pods)
	if n > 0 && from+n < to {
		to = from + n
		list.Continue = fmt.Sprintf("%d-%d", rv, to)
	}
	for _, p := range pods[from:to] {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

// podsAt replays the log up to rv, sorted by key.
func (s *podAPIServer) podsAt(rv int) []*corev1.Pod {
	state := map[string]*corev1.Pod{}
	for _, e := range s.log {
		if e.rv > rv {
			break
		}
		key := e.pod.Namespace + "/" + e.pod.Name
		if e.typ == watch.Deleted {
			delete(state, key)
		} else {
			state[key] = e.pod
		}
	}
	var out []*corev1.Pod
	for _, p := range state {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

func (s *podAPIServer) watch(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	bookmarks := r.URL.Query().Get("allowWatchBookmarks") == "true"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	enc := json.NewEncoder(w)
	send := func(typ watch.EventType, pod *corev1.Pod) {
		p := pod.DeepCopy()
		p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
		raw, _ := json.Marshal(p)
		_ = enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}})
		flusher.Flush()
	}
	done := r.Context().Done()
	go func() {
		<-done
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	}()
	next := 0
	sentBookmark := false
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		// A watch-list: every Pod as an add, then the bookmark ending them.
		s.mu.Lock()
		from = s.rv
		initial := s.podsAt(from)
		s.mu.Unlock()
		for _, p := range initial {
			send(watch.Added, p)
		}
		send(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(from),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
		sentBookmark = true
	}
	for {
		s.mu.Lock()
		for next < len(s.log) && s.log[next].rv <= from {
			next++
		}
		for next >= len(s.log) && sentBookmark && !s.closed && r.Context().Err() == nil {
			s.changed.Wait()
		}
		if s.closed || r.Context().Err() != nil {
			s.mu.Unlock()
			return
		}
		events := append([]podEvent(nil), s.log[next:]...)
		next = len(s.log)
		rv := s.rv
		s.mu.Unlock()
		for _, e := range events {
			send(e.typ, e.pod)
		}
		if !sentBookmark {
			sentBookmark = true
			if bookmarks {
				send(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(rv)}})
			}
		}
	}
}

func (s *podAPIServer) takeFullLists() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.fullLists
	s.fullLists = 0
	return n
}
