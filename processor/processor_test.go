package processor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// upstream is a DoneChecker the test closes to say "the informer synced".
type upstream struct {
	ch   chan struct{}
	once sync.Once
}

func newUpstream() *upstream              { return &upstream{ch: make(chan struct{})} }
func (u *upstream) Name() string          { return "test upstream" }
func (u *upstream) Done() <-chan struct{} { return u.ch }
func (u *upstream) sync()                 { u.once.Do(func() { close(u.ch) }) }

// recorder records handler calls in order and can block them.
type recorder struct {
	mu     sync.Mutex
	events []string
	gate   chan struct{} // when non-nil, every call waits for a receive
}

func (r *recorder) record(s string) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}
func (r *recorder) OnAdd(obj interface{}, initial bool) {
	r.record(fmt.Sprintf("add %v %v", obj, initial))
}
func (r *recorder) OnUpdate(o, n interface{}) { r.record(fmt.Sprintf("update %v %v", o, n)) }
func (r *recorder) OnDelete(obj interface{})  { r.record(fmt.Sprintf("delete %v", obj)) }
func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func TestDeliveryIsInOrderAndUnboundedPerListener(t *testing.T) {
	p := New(testingclock.NewFakeClock(time.Now()))
	up := newUpstream()
	slow := &recorder{gate: make(chan struct{})}
	fast := &recorder{}
	ls := NewListener(slow, ListenerOptions{Now: time.Now(), BufferSize: 1, UpstreamHasSynced: up})
	lf := NewListener(fast, ListenerOptions{Now: time.Now(), BufferSize: 1, UpstreamHasSynced: up})
	p.AddListener(ls)
	p.AddListener(lf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()

	const n = 5000
	for i := 0; i < n; i++ {
		p.Distribute(UpdateNotification{Old: i, New: i + 1}, false)
	}
	// The fast handler got everything although the slow one has not
	// handled a single notification: buffers are per listener and unbounded.
	poll.Until(t, 10*time.Second, "fast handler", func() bool { return len(fast.got()) == n })
	if len(slow.got()) != 0 {
		t.Fatal("slow handler ran without being released")
	}
	// The last notification may still wait in the listener's add channel
	// when the fast handler has them all. The slow listener's buffer takes
	// it soon; only its handler and the hand-off hold the other two.
	poll.Until(t, 10*time.Second, "slow listener's pending notifications", func() bool { return ls.Pending() >= n-2 })
	go func() {
		for i := 0; i < n; i++ {
			slow.gate <- struct{}{}
		}
	}()
	poll.Until(t, 10*time.Second, "slow handler", func() bool { return len(slow.got()) == n })
	for _, r := range []*recorder{slow, fast} {
		for i, e := range r.got() {
			if want := fmt.Sprintf("update %d %d", i, i+1); e != want {
				t.Fatalf("event %d = %q, want %q", i, e, want)
			}
		}
	}
	cancel()
	<-done
}

// start runs p until the returned stop is called; stop returns once Run
// has.
func start(p *Processor) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

func TestListenerSyncedAfterUpstreamAndInitialAdds(t *testing.T) {
	// In a bubble, synctest.Wait returns once the listener's goroutines are
	// blocked on the gated handler. So "not synced yet" is checked after
	// everything that could make it sync has run, without sleeping.
	synctest.Test(t, func(t *testing.T) {
		p := New(testingclock.NewFakeClock(time.Now()))
		up := newUpstream()
		r := &recorder{gate: make(chan struct{})}
		l := NewListener(r, ListenerOptions{Now: time.Now(), BufferSize: 1, UpstreamHasSynced: up})
		p.AddListener(l)
		stop := start(p)
		defer func() {
			close(r.gate) // lets a gated handler return if the test failed early
			stop()
		}()
		p.Distribute(AddNotification{Obj: "a", IsInInitialList: true}, false)
		p.Distribute(AddNotification{Obj: "b", IsInInitialList: true}, false)
		up.sync()
		synctest.Wait()
		if l.HasSynced() {
			t.Fatal("synced before its initial adds were handled")
		}
		r.gate <- struct{}{}
		synctest.Wait()
		if l.HasSynced() {
			t.Fatal("synced with one initial add still pending")
		}
		r.gate <- struct{}{}
		synctest.Wait()
		if !l.HasSynced() {
			t.Fatal("not synced once the upstream synced and both initial adds were handled")
		}
		select {
		case <-l.HasSyncedChecker().Done():
		default:
			t.Fatal("HasSyncedChecker not done although HasSynced is true")
		}
	})
}

// A listener told to await initial adds stays unsynced after the upstream
// synced, whatever it handles. It syncs once it has handled InitialAddsDone
// and every add queued before it. The handler itself never sees
// InitialAddsDone.
func TestListenerAwaitingInitialAddsSyncsAfterInitialAddsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(testingclock.NewFakeClock(time.Now()))
		up := newUpstream()
		r := &recorder{}
		l := NewListener(r, ListenerOptions{Now: time.Now(), BufferSize: 1, UpstreamHasSynced: up})
		p.AddListener(l)
		l.AwaitInitialAdds()
		defer start(p)()
		up.sync() // a warm start syncs before handing out its stored state
		p.DistributeTo([]*Listener{l}, AddNotification{Obj: "a", IsInInitialList: true})
		p.Distribute(UpdateNotification{Old: "a", New: "a2"}, false)
		synctest.Wait()
		if l.HasSynced() {
			t.Fatal("synced before InitialAddsDone")
		}
		r.gate = make(chan struct{})
		p.DistributeTo([]*Listener{l}, AddNotification{Obj: "b", IsInInitialList: true})
		p.DistributeTo([]*Listener{l}, InitialAddsDone{})
		synctest.Wait()
		if l.HasSynced() {
			t.Fatal("synced with an initial add queued before InitialAddsDone still being handled")
		}
		close(r.gate)
		synctest.Wait()
		if !l.HasSynced() {
			t.Fatal("not synced after handling InitialAddsDone")
		}
		if got := fmt.Sprint(r.got()); got != "[add a true update a a2 add b true]" {
			t.Errorf("handler calls %s, want the adds and the update only", got)
		}
	})
}

// Distributors that start before the processor runs all wait, and all
// deliver once it runs (a warm start's delivery and the queue both may).
func TestDistributorsWaitingForRunAllDeliver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(testingclock.NewFakeClock(time.Now()))
		r := &recorder{}
		l := NewListener(r, ListenerOptions{Now: time.Now(), BufferSize: 1, UpstreamHasSynced: newUpstream()})
		p.AddListener(l)
		var wg sync.WaitGroup
		wg.Go(func() { p.DistributeTo([]*Listener{l}, AddNotification{Obj: "a", IsInInitialList: true}) })
		wg.Go(func() { p.Distribute(AddNotification{Obj: "b"}, false) })
		synctest.Wait() // both wait for Run
		stop := start(p)
		wg.Wait()
		synctest.Wait()
		stop()
		if got := r.got(); len(got) != 2 {
			t.Errorf("handler calls %v, want both notifications", got)
		}
	})
}

func TestResyncGoesOnlyToDueListeners(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	p := New(clk)
	up := newUpstream()
	every := &recorder{}
	never := &recorder{}
	le := NewListener(every, ListenerOptions{RequestedResyncPeriod: 10 * time.Second, ResyncPeriod: 10 * time.Second, Now: clk.Now(), BufferSize: 1, UpstreamHasSynced: up})
	ln := NewListener(never, ListenerOptions{Now: clk.Now(), BufferSize: 1, UpstreamHasSynced: up})
	p.AddListener(le)
	p.AddListener(ln)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	if p.ShouldResync() {
		t.Fatal("resync due before its period")
	}
	clk.Step(10 * time.Second)
	if !p.ShouldResync() {
		t.Fatal("resync not due after its period")
	}
	p.Distribute(UpdateNotification{Old: "x", New: "x"}, true)
	p.Distribute(DeleteNotification{Obj: "y"}, false)
	poll.Until(t, 10*time.Second, "deliveries", func() bool { return len(every.got()) == 2 && len(never.got()) == 1 })
	if got := never.got()[0]; got != "delete y" {
		t.Errorf("non-resyncing listener got %q", got)
	}
	// The next resync is scheduled a period later.
	clk.Step(5 * time.Second)
	if p.ShouldResync() {
		t.Error("resync due again after half a period")
	}
}

func TestRemoveListenerStopsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := New(testingclock.NewFakeClock(time.Now()))
		up := newUpstream()
		r := &recorder{}
		l := NewListener(r, ListenerOptions{Now: time.Now(), BufferSize: 1, UpstreamHasSynced: up})
		p.AddListener(l)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go p.Run(ctx)
		p.Distribute(DeleteNotification{Obj: 1}, false)
		// A removed listener drops what it has buffered but not handed out,
		// as client-go's does. So wait for the first delivery before
		// removing. This test checks that nothing arrives afterwards.
		poll.Until(t, 10*time.Second, "first delivery", func() bool { return len(r.got()) == 1 })
		if err := p.RemoveListener(l); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.ShutdownChan():
		case <-time.After(5 * time.Second):
			t.Fatal("removed listener did not shut down")
		}
		p.Distribute(DeleteNotification{Obj: 2}, false)
		synctest.Wait() // whatever could deliver it has run
		if got := r.got(); len(got) != 1 {
			t.Errorf("removed listener got %v", got)
		}
		if err := p.RemoveListener(l); err != nil {
			t.Errorf("removing twice: %v", err)
		}
		var foreign cache.ResourceEventHandlerRegistration = fakeRegistration{}
		if err := p.RemoveListener(foreign); err == nil {
			t.Error("removing a foreign registration did not fail")
		}
	})
}

type fakeRegistration struct{}

func (fakeRegistration) HasSynced() bool                     { return false }
func (fakeRegistration) HasSyncedChecker() cache.DoneChecker { return nil }

func TestDetermineResyncPeriod(t *testing.T) {
	for _, c := range []struct{ desired, check, want time.Duration }{
		{0, time.Minute, 0},
		{time.Minute, 0, 0},
		{time.Second, time.Minute, time.Minute},
		{time.Hour, time.Minute, time.Hour},
	} {
		if got := DetermineResyncPeriod(klog.Background(), c.desired, c.check); got != c.want {
			t.Errorf("DetermineResyncPeriod(%v, %v) = %v, want %v", c.desired, c.check, got, c.want)
		}
	}
}

func TestHandlerName(t *testing.T) {
	if got := nameForHandler(&recorder{}); got != "github.com/boltinformer/boltinformer/processor.recorder" {
		t.Errorf("name = %q", got)
	}
	funcs := cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) {}}
	if got := nameForHandler(funcs); got != "github.com/boltinformer/boltinformer/processor.TestHandlerName" {
		t.Errorf("funcs name = %q", got)
	}
}

func TestSelectResyncingListeners(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	p := New(clk)
	up := newUpstream()
	resyncing, plain := &recorder{}, &recorder{}
	p.AddListener(NewListener(resyncing, ListenerOptions{RequestedResyncPeriod: time.Minute, ResyncPeriod: time.Minute, Now: clk.Now(), BufferSize: 1, UpstreamHasSynced: up}))
	p.AddListener(NewListener(plain, ListenerOptions{Now: clk.Now(), BufferSize: 1, UpstreamHasSynced: up}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	// As in client-go, new listeners are all due until a resync check...
	p.Distribute(UpdateNotification{Old: "a", New: "a"}, true)
	poll.Until(t, 10*time.Second, "first sync update", func() bool { return len(resyncing.got()) == 1 && len(plain.got()) == 1 })
	// ...unless the resyncing ones are selected, as a warm start does.
	p.SelectResyncingListeners()
	p.Distribute(UpdateNotification{Old: "b", New: "b"}, true)
	p.Distribute(DeleteNotification{Obj: "c"}, false)
	poll.Until(t, 10*time.Second, "second round", func() bool { return len(resyncing.got()) == 3 && len(plain.got()) == 2 })
	if got := plain.got()[1]; got != "delete c" {
		t.Errorf("listener without resync got %q", got)
	}
}

// TestListenerOptionsZeroValues checks NewListener's documented defaults: a
// zero ListenerOptions (but for the required upstream) gives a listener that
// delivers with no resyncs, and a missing upstream is API misuse.
func TestListenerOptionsZeroValues(t *testing.T) {
	up := newUpstream()
	r := &recorder{}
	l := NewListener(r, ListenerOptions{UpstreamHasSynced: up})
	if l.shouldResync(time.Now().Add(time.Hour)) {
		t.Error("a listener with no resync period resyncs")
	}
	p := New(testingclock.NewFakeClock(time.Now()))
	p.AddListener(l)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	p.Distribute(AddNotification{Obj: "a"}, false)
	poll.Until(t, 10*time.Second, "the add delivered", func() bool { return len(r.got()) == 1 })
	cancel()
	<-done

	defer func() {
		if recover() == nil {
			t.Error("NewListener without UpstreamHasSynced did not panic")
		}
	}()
	NewListener(r, ListenerOptions{})
}
