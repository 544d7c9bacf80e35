package reflectortest

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
)

// RecordingStore is a reflector.Store that records every write and tracks
// name → resourceVersion. Its zero value is not usable: call
// NewRecordingStore.
type RecordingStore struct {
	// mu guards every field below.
	mu        sync.Mutex
	calls     []string
	objs      map[string]string
	resyncs   int
	resyncErr error // returned by the next Resync, then cleared
}

// NewRecordingStore returns an empty RecordingStore.
func NewRecordingStore() *RecordingStore { return &RecordingStore{objs: map[string]string{}} }

// NameRV returns obj's name and resourceVersion. It panics on an object
// without metadata, which no reflector test hands to a store.
func NameRV(obj interface{}) (name, rv string) {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	return m.GetName(), m.GetResourceVersion()
}

func (s *RecordingStore) Add(obj interface{}) error    { return s.write("add", obj) }
func (s *RecordingStore) Update(obj interface{}) error { return s.write("update", obj) }
func (s *RecordingStore) Delete(obj interface{}) error { return s.write("delete", obj) }

// write records the call verb on obj. A delete forgets obj's name, any
// other write tracks obj's resourceVersion.
func (s *RecordingStore) write(verb string, obj interface{}) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, rv := NameRV(obj)
	if verb == "delete" {
		delete(s.objs, name)
	} else {
		s.objs[name] = rv
	}
	s.calls = append(s.calls, verb+" "+name+"@"+rv)
	return nil
}

func (s *RecordingStore) Replace(list []interface{}, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs = map[string]string{}
	for _, obj := range list {
		name, objRV := NameRV(obj)
		s.objs[name] = objRV
	}
	s.calls = append(s.calls, fmt.Sprintf("replace %d@%s", len(list), rv))
	return nil
}

// Resync counts the call and returns the error SetResyncErr set, once.
func (s *RecordingStore) Resync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncs++
	err := s.resyncErr
	s.resyncErr = nil
	return err
}

func (s *RecordingStore) Bookmark(rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "bookmark@"+rv)
	return nil
}

// Load tracks the objects of items without recording a call. A paged
// list's pages are stored so, before the list's end is recorded.
func (s *RecordingStore) Load(items []interface{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, obj := range items {
		name, rv := NameRV(obj)
		s.objs[name] = rv
	}
}

// Calls returns a copy of the writes recorded so far, in order.
func (s *RecordingStore) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Objects returns a copy of the tracked name → resourceVersion map.
func (s *RecordingStore) Objects() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.objs)
}

// Resyncs returns how many times Resync was called.
func (s *RecordingStore) Resyncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resyncs
}

// SetResyncErr makes the next Resync return err.
func (s *RecordingStore) SetResyncErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resyncErr = err
}
