package factory

import (
	"context"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/boltinformer/boltinformer/internal/wire"
)

// listServer answers every request on its path with its next answer. An
// answer with conn set closes the connection without a response.
type listServer struct {
	*httptest.Server
	mu       sync.Mutex
	answers  []listAnswer
	requests int
}

type listAnswer struct {
	code        int
	contentType string
	body        []byte
	drop        bool // close the connection unanswered
	cut         bool // promise twice the body, then close the connection
}

func newListServer(t *testing.T) *listServer {
	s := &listServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		if len(s.answers) == 0 {
			s.mu.Unlock()
			http.Error(w, "no answer queued", http.StatusInternalServerError)
			return
		}
		a := s.answers[0]
		s.answers = s.answers[1:]
		s.mu.Unlock()
		if a.drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		if a.cut {
			w.Header().Set("Content-Length", strconv.Itoa(2*len(a.body)))
		}
		w.WriteHeader(a.code)
		_, _ = w.Write(a.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *listServer) queue(answers ...listAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = append(s.answers, answers...)
}

func (s *listServer) takeRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.requests
	s.requests = 0
	return n
}

// clientset returns a clientset of s that asks for contentType. Each request
// has a connection of its own, which Go's transport never sends again.
func (s *listServer) clientset(t *testing.T, contentType string) kubernetes.Interface {
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: s.URL, ContentConfig: rest.ContentConfig{ContentType: contentType}, QPS: -1,
		Transport: &http.Transport{DisableKeepAlives: true}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// encodeAs encodes obj as kube-apiserver does, in protobuf or JSON.
func encodeAs(t testing.TB, obj kruntime.Object, proto bool) listAnswer {
	var serializer kruntime.Encoder = scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion)
	contentType := kruntime.ContentTypeJSON
	if proto {
		serializer = scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), corev1.SchemeGroupVersion)
		contentType = kruntime.ContentTypeProtobuf
	}
	body, err := kruntime.Encode(serializer, obj)
	if err != nil {
		t.Fatal(err)
	}
	return listAnswer{code: http.StatusOK, contentType: contentType, body: body}
}

// fuzzedPods returns a list of n Pods with every field drawn, as
// apimachinery's round-trip tests draw them.
func fuzzedPods(seed int64, n int) *corev1.PodList {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), scheme.Codecs).NilChance(0.2).NumElements(1, 3)
	list := &corev1.PodList{}
	f.Fill(&list.ListMeta)
	list.Items = make([]corev1.Pod, n)
	for i := range list.Items {
		f.Fill(&list.Items[i])
		list.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	return list
}

// podsListerWatcher returns the ListerWatcher the factory gives a Pod
// informer of cs listing every namespace.
func podsListerWatcher(t *testing.T, cs kubernetes.Interface) cache.ListerWatcherWithContext {
	t.Helper()
	_, wired := wiredFor(t, cs, nil)
	return cache.ToListerWatcherWithContext(wired)
}

// allocated returns the bytes fn allocated, the least of five runs.
func allocated(fn func()) uint64 {
	least := ^uint64(0)
	for range 5 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// A page of a paged list is read into a buffer the next page reuses, and
// decoded where it lies. client-go's typed List reads it with io.ReadAll
// and copies its message out of the envelope: three bodies or more.
func TestWireListAllocatesNoCopyOfTheBody(t *testing.T) {
	s := newListServer(t)
	cs := s.clientset(t, "")
	lw := podsListerWatcher(t, cs)
	pods := fuzzedPods(1, 100)
	pods.Continue = "more"
	page := encodeAs(t, pods, true)
	ctx := context.Background()

	typed := allocated(func() {
		s.queue(page)
		if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 500}); err != nil {
			t.Fatal(err)
		}
	})
	wire := allocated(func() {
		s.queue(page)
		if _, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 500}); err != nil {
			t.Fatal(err)
		}
	})
	body := uint64(len(page.body))
	t.Logf("body %d bytes; typed client's List allocated %d, the factory's %d", body, typed, wire)
	if wire+2*body > typed {
		t.Errorf("the factory's List allocated %d bytes, the typed client's %d: want at least two bodies (2 × %d) fewer", wire, typed, body)
	}
}

// The factory's List returns what the typed client's List returns, for
// drawn Pods in protobuf and JSON, and the same error for each failure.
func TestWireListIsTheTypedClientsList(t *testing.T) {
	s := newListServer(t)
	ctx := context.Background()
	for seed := range int64(30) {
		list := fuzzedPods(seed, 1+int(seed%7))
		for _, proto := range []bool{true, false} {
			answer := encodeAs(t, list, proto)
			for _, contentType := range []string{"", kruntime.ContentTypeJSON} {
				cs := s.clientset(t, contentType)
				s.queue(answer, answer)
				want, wantErr := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
				got, err := podsListerWatcher(t, cs).ListWithContext(ctx, metav1.ListOptions{})
				if err != nil || wantErr != nil {
					t.Fatalf("seed %d, protobuf %v: errors %v and %v", seed, proto, err, wantErr)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d, protobuf %v, client %q: the factory's List differs from the typed client's:\n%#v\n%#v", seed, proto, contentType, got, want)
				}
			}
		}
	}

	status := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "The provided continue parameter is too old"}
	gone := func(a listAnswer) listAnswer { a.code = http.StatusGone; return a }
	failures := map[string]listAnswer{
		"410 Status":           gone(encodeAs(t, status, true)),
		"410 Status in JSON":   gone(encodeAs(t, status, false)),
		"empty body":           {code: http.StatusOK, contentType: kruntime.ContentTypeProtobuf},
		"body cut short":       cutShort(encodeAs(t, fuzzedPods(3, 4), true)),
		"not a list":           encodeAs(t, &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}}, true),
		"Status answered 200":  {code: http.StatusOK, contentType: kruntime.ContentTypeProtobuf, body: encodeAs(t, status, true).body},
		"500 with a text body": {code: http.StatusInternalServerError, contentType: "text/plain", body: []byte("boom")},
	}
	for name, answer := range failures {
		cs := s.clientset(t, "")
		s.queue(answer, answer)
		_, wantErr := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		_, err := podsListerWatcher(t, cs).ListWithContext(ctx, metav1.ListOptions{})
		t.Logf("%s: typed: %v; factory: %v", name, wantErr, err)
		if name == "not a list" {
			// The typed client decodes a Pod into its PodList as an empty
			// list; the factory's List reports what came.
			if err == nil {
				t.Errorf("%s: the factory's List returned no error", name)
			}
			continue
		}
		if err == nil || wantErr == nil {
			t.Errorf("%s: errors %v (factory) and %v (typed client), want both", name, err, wantErr)
			continue
		}
		if apierrors.ReasonForError(err) != apierrors.ReasonForError(wantErr) || apierrors.IsResourceExpired(err) != apierrors.IsResourceExpired(wantErr) {
			t.Errorf("%s: reason %q (factory), %q (typed client)", name, apierrors.ReasonForError(err), apierrors.ReasonForError(wantErr))
		}
	}
}

// A body that ends where a field of its envelope ends, before the list, is
// an error. The typed client's List takes it for a list without items. A
// paged list would then skip the page's objects.
func TestWireListRejectsABodyCutBeforeItsList(t *testing.T) {
	s := newListServer(t)
	cs := s.clientset(t, "")
	pods := fuzzedPods(7, 3)
	pods.Continue = "more"
	answer := encodeAs(t, pods, true)
	// The envelope's first field, its TypeMeta, ends before the raw list.
	_, _, n := protowire.ConsumeField(answer.body[len(wire.Prefix):])
	if n <= 0 {
		t.Fatalf("no field at the envelope's start: %d", n)
	}
	answer.body = answer.body[:len(wire.Prefix)+n]

	s.queue(answer, answer)
	typed, typedErr := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	t.Logf("typed client: %d items, continue %q, error %v", len(typed.Items), typed.Continue, typedErr)
	got, err := podsListerWatcher(t, cs).ListWithContext(context.Background(), metav1.ListOptions{})
	if err == nil {
		t.Fatalf("the factory's List took a body cut before its list for %#v", got)
	}
}

// cutShort returns a with its body cut in the middle, so that the client
// sees the connection end early.
func cutShort(a listAnswer) listAnswer {
	a.body = a.body[:len(a.body)/2]
	a.cut = true
	return a
}

// Objects listed earlier stay as they were decoded while later lists reuse
// the buffer their body was read into. A decoder that left a string or
// bytes field aliasing the body would see it overwritten here.
func TestWireListObjectsOutliveTheirBody(t *testing.T) {
	s := newListServer(t)
	cs := s.clientset(t, "")
	lw := podsListerWatcher(t, cs)
	ctx := context.Background()
	type listed struct {
		seed int64
		got  kruntime.Object
	}
	var earlier []listed
	for seed := range int64(40) {
		pods := fuzzedPods(seed, 3)
		pods.Continue = "more" // so that the next list reuses the buffer
		answer := encodeAs(t, pods, true)
		s.queue(answer)
		got, err := lw.ListWithContext(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		earlier = append(earlier, listed{seed, got})
	}
	for _, l := range earlier {
		pods := fuzzedPods(l.seed, 3)
		pods.Continue = "more"
		s.queue(encodeAs(t, pods, true))
		want, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(l.got, want) {
			t.Fatalf("seed %d: the list changed after later lists reused its body:\n%#v\n%#v", l.seed, l.got, want)
		}
	}
}

// A GET whose connection closed unanswered is sent again after a second,
// as the typed client's Request.Do sends it. The attempts are bounded.
func TestWireListRetriesAClosedConnection(t *testing.T) {
	s := newListServer(t)
	cs := s.clientset(t, "")
	lw := podsListerWatcher(t, cs)
	ctx := context.Background()
	page := encodeAs(t, fuzzedPods(5, 2), true)
	drop := listAnswer{drop: true}
	dropped := func(drops int) []listAnswer {
		answers := make([]listAnswer, 0, drops+1)
		for range drops {
			answers = append(answers, drop)
		}
		return append(answers, page)
	}
	forget := func() {
		s.mu.Lock()
		s.answers = nil
		s.mu.Unlock()
	}
	for _, drops := range []int{1, 2} {
		s.queue(dropped(drops)...)
		start := time.Now()
		_, wantErr := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		wantTook, wantRequests := time.Since(start), s.takeRequests()
		forget()

		s.queue(dropped(drops)...)
		start = time.Now()
		_, err := lw.ListWithContext(ctx, metav1.ListOptions{})
		took, requests := time.Since(start), s.takeRequests()
		forget()
		t.Logf("%d dropped: typed %d requests in %v, %v; factory %d requests in %v, %v", drops, wantRequests, wantTook, wantErr, requests, took, err)
		if (err == nil) != (wantErr == nil) || requests != wantRequests {
			t.Errorf("%d connections dropped: the factory's List made %d requests (error %v), the typed client's %d (error %v)", drops, requests, err, wantRequests, wantErr)
		}
		// Each retry waits listRetryWait, as the typed client's.
		if wait := time.Duration(drops) * listRetryWait; wantTook < wait || took < wait {
			t.Errorf("%d connections dropped: the factory's List took %v, the typed client's %v: want a wait of %v before each retry", drops, took, wantTook, listRetryWait)
		}
	}

	c := newWireClient(cs.CoreV1().RESTClient())
	c.retryWait = 0
	s.queue(dropped(3 * listRetries)...)
	_, err := c.list(ctx, "", "pods", metav1.ListOptions{}, reflect.TypeFor[*corev1.PodList](), &pageBuffer{})
	requests := s.takeRequests()
	forget()
	if err == nil || requests != listRetries+1 {
		t.Errorf("every connection dropped: %d requests, error %v; want an error after %d attempts", requests, err, listRetries+1)
	}
}
