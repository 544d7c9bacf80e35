package cache

import (
	"context"
	"time"

	"github.com/boltinformer/boltinformer/processor"
)

// pacer holds back whoever hands a bounded informer's initial adds out to
// the pace of the handlers taking them. The hand-out is the warm start's
// walk of the file or a cold start's paged list. The objects waiting in a
// handler's buffer are decoded objects that nothing else keeps. A bounded
// store holds only its cache's worth. So a hand-out running ahead of its
// slowest handler would hold the whole collection decoded. Bounded mode
// promises not to do that.
//
// wait returns once every handler working through its buffer has at most
// paceWindow notifications waiting. A handler that has taken none for
// paceStall is not waited for until it has caught up again. It may be stuck,
// or blocked on something that waits for the hand-out to end. An index
// lookup during a warm start waits so. The buffer of such a handler grows as
// client-go's would. Only the goroutine handing out uses a pacer.
type pacer struct {
	// stalled holds the handlers not waited for.
	stalled map[*processor.Listener]bool
}

const (
	// paceWindow is how many notifications a handler may have waiting
	// before the hand-out waits for it. It is the buffer's initial size, so
	// a paced buffer never grows.
	paceWindow = processor.InitialBufferSize
	// paceTick is how often a waiting hand-out looks again.
	paceTick = time.Millisecond
)

// paceStall is how long a handler may take no notification before it is
// no longer waited for. It is a variable for the tests.
var paceStall = time.Second

func newPacer() *pacer { return &pacer{stalled: map[*processor.Listener]bool{}} }

// wait blocks until each listener that is taking its notifications has at
// most paceWindow waiting, or until ctx ends. A nil pacer does not wait.
func (p *pacer) wait(ctx context.Context, listeners []*processor.Listener) {
	if p == nil {
		return
	}
	var tick *time.Ticker
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for _, l := range listeners {
		n := l.Pending()
		if n <= paceWindow {
			delete(p.stalled, l)
			continue
		}
		if p.stalled[l] {
			continue
		}
		if tick == nil {
			tick = time.NewTicker(paceTick)
		}
		last, progressed := n, time.Now()
		for n > paceWindow {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if n = l.Pending(); n < last {
					last, progressed = n, now
				} else if now.Sub(progressed) >= paceStall {
					p.stalled[l] = true
					n = 0 // not waited for
				}
			}
		}
	}
}
