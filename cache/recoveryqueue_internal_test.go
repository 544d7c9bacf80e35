package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/recovery"
)

// transformedPod is what the test transform makes of a Pod: the queue must
// hand out every object it was given transformed, and nothing else.
type transformedPod struct{ *corev1.Pod }

// podsOnlyTransform counts its calls and fails for anything but a Pod, as
// a user's transform that asserts its input type does.
type podsOnlyTransform struct {
	mu    sync.Mutex
	calls int
}

func (t *podsOnlyTransform) transform(obj interface{}) (interface{}, error) {
	t.mu.Lock()
	t.calls++
	t.mu.Unlock()
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("transform given a %T", obj)
	}
	return transformedPod{p}, nil
}

// A recovery's steps ride the informer's own queue, built as begin builds
// it, with a transform that fails for anything but a Pod. Random runs of
// pods, tombstones, bookmarks and steps come out of Pop and PopBatch in the
// order queued. Each step comes out unchanged and untransformed. Each Pod
// is transformed once. No batch holds two steps, so each step is applied
// alone after the deltas before it.
func TestQueueCarriesRecoverySteps(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			tf := &podsOnlyTransform{}
			s := &Informer{objectType: &corev1.Pod{}, life: lifecycle{transform: tf.transform}}
			fifo := s.newQueue(klog.Background())
			q := recoveryQueue{RealFIFO: fifo, s: s}

			// want describes each queued item as it must come out.
			var want []string
			pods := 0
			for i := range 1 + rng.Intn(40) {
				name := fmt.Sprintf("p%d", rng.Intn(5))
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: fmt.Sprint(i + 1)}}
				var err error
				switch rng.Intn(6) {
				case 0:
					err = fifo.Add(pod)
					want, pods = append(want, "pod ns/"+name), pods+1
				case 1:
					err = fifo.Update(pod)
					want, pods = append(want, "pod ns/"+name), pods+1
				case 2:
					err = fifo.Delete(cache.DeletedFinalStateUnknown{Key: "ns/" + name, Obj: pod})
					want = append(want, "tombstone ns/"+name)
				case 3:
					err = fifo.Bookmark(fmt.Sprint(i + 1))
					want = append(want, "bookmark")
				default:
					err = q.End(fmt.Sprint(i + 1))
					want = append(want, "end "+fmt.Sprint(i+1))
				}
				if err != nil {
					t.Fatalf("queueing item %d: %v", i, err)
				}
			}

			var got []string
			process := func(deltas []cache.Delta) error {
				steps := 0
				for _, d := range deltas {
					if step, ok := recoveryStepOf(d); ok {
						steps++
						if step.diff != nil {
							return fmt.Errorf("an end step came out with a diff")
						}
						got = append(got, "end "+step.rv)
						continue
					}
					switch o := d.Object.(type) {
					case transformedPod:
						got = append(got, "pod ns/"+o.Name)
					case cache.DeletedFinalStateUnknown:
						got = append(got, "tombstone "+o.Key)
					case cache.BookmarkInfo:
						got = append(got, "bookmark")
					default:
						return fmt.Errorf("popped a %s delta of %T", d.Type, d.Object)
					}
				}
				if steps > 1 {
					return fmt.Errorf("one batch holds %d recovery steps", steps)
				}
				return nil
			}
			batch := rng.Intn(2) == 0
			for len(got) < len(want) {
				var err error
				if batch {
					err = fifo.PopBatch(func(deltas []cache.Delta, _ bool) error { return process(deltas) },
						func(obj interface{}, _ bool) error { return process(obj.(cache.Deltas)) })
				} else {
					_, err = fifo.Pop(func(obj interface{}, _ bool) error { return process(obj.(cache.Deltas)) })
				}
				if err != nil {
					t.Fatalf("batch=%v: %v", batch, err)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("batch=%v popped\n %v\nwant\n %v", batch, got, want)
			}
			if tf.calls != pods {
				t.Errorf("the transform ran %d times for %d pods", tf.calls, pods)
			}
		})
	}
}

// A begin step reaches the queue's consumer carrying its diff, and the
// consumer's answer reaches Begin, without the transform.
func TestQueueCarriesABeginStep(t *testing.T) {
	tf := &podsOnlyTransform{}
	s := &Informer{objectType: &corev1.Pod{}, life: lifecycle{transform: tf.transform}}
	fifo := s.newQueue(klog.Background())
	q := recoveryQueue{RealFIFO: fifo, s: s}
	refused := errors.New("refused by the test")
	diff := func(map[string]recovery.Version) (recovery.Plan, error) { return recovery.Plan{}, nil }
	begun := make(chan error, 1)
	go func() {
		begun <- q.Begin(context.Background(), diff)
		fifo.Close() // a step never queued must not leave Pop waiting
	}()
	if _, err := fifo.Pop(func(obj interface{}, _ bool) error {
		deltas := obj.(cache.Deltas)
		step, ok := recoveryStepOf(deltas[0])
		if !ok || step.diff == nil {
			return fmt.Errorf("popped %s %T, want a begin step", deltas[0].Type, deltas[0].Object)
		}
		step.done <- refused
		return nil
	}); err != nil {
		t.Fatalf("popping the begin step: %v (BeginRecovery: %v)", err, <-begun)
	}
	if err := <-begun; !errors.Is(err, refused) {
		t.Errorf("BeginRecovery returned %v, want the consumer's answer", err)
	}
	if tf.calls != 0 {
		t.Errorf("the transform ran %d times for a recovery step", tf.calls)
	}
}
