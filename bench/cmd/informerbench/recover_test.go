package main

import (
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

func TestParseChangedAndCounts(t *testing.T) {
	amounts, err := parseChanged("0.1%, 1%,10%,100,1k")
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	var at100k, at3k []int
	for _, a := range amounts {
		labels = append(labels, a.label)
		at100k, at3k = append(at100k, a.of(100000)), append(at3k, a.of(3000))
	}
	if want := []string{"0.1%", "1%", "10%", "100", "1k"}; !slices.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
	if want := []int{100, 1000, 10000, 100, 1000}; !slices.Equal(at100k, want) {
		t.Errorf("of 100k: %v, want %v", at100k, want)
	}
	if want := []int{3, 30, 300, 100, 1000}; !slices.Equal(at3k, want) {
		t.Errorf("of 3k: %v, want %v", at3k, want)
	}
	tiny, _ := parseChanged("0.01%")
	if got := tiny[0].of(3000); got != 1 {
		t.Errorf("0.01%% of 3000 = %d, want 1: a fraction changes at least one Pod", got)
	}
	if got := amounts[4].of(500); got != 500 {
		t.Errorf("1k of 500 = %d, want 500: never more than there are", got)
	}
	for _, bad := range []string{"0%", "101%", "x%", "-5", "", "1%,"} {
		if _, err := parseChanged(bad); err == nil {
			t.Errorf("parseChanged(%q) succeeded, want an error", bad)
		}
	}
}

func TestDowntimeChanges(t *testing.T) {
	const window = 75 * time.Second
	for _, c := range []struct {
		d              time.Duration
		n              int
		writes, change int
		expired        bool
	}{
		{0, 100000, 0, 0, false},
		{20 * time.Second, 100000, 400, 399, false},
		{window, 100000, 1500, 1489, false}, // the window itself still resumes
		{76 * time.Second, 100000, 1520, 1509, true},
		{30 * time.Minute, 100000, 36000, 30232, true}, // 36,000 writes touch 30% of the Pods
		{10 * time.Minute, 10, 12000, 10, true},        // every Pod, at most
	} {
		w, ch, exp := downtimeChanges(c.d, 20, window, c.n)
		if w != c.writes || ch != c.change || exp != c.expired {
			t.Errorf("down %v on %d Pods: %d writes, %d changed, expired %v; want %d, %d, %v", c.d, c.n, w, ch, exp, c.writes, c.change, c.expired)
		}
	}
}

func TestChangeMixCounts(t *testing.T) {
	mix := changeMix{80, 5, 10, 5}
	for c, want := range map[int]changeCounts{
		1000: {Update: 800, Delete: 50, Recreate: 100, Create: 50},
		100:  {Update: 80, Delete: 5, Recreate: 10, Create: 5},
		10:   {Update: 7, Delete: 1, Recreate: 1, Create: 1},
		1:    {Update: 1},
		0:    {},
	} {
		if got := mix.counts(c); got != want {
			t.Errorf("counts(%d) = %+v, want %+v", c, got, want)
		}
	}
	// Whatever the mix, the counts add up and the collection keeps its
	// size.
	for _, m := range []changeMix{{0, 50, 0, 50}, {1, 1, 1, 1}, {0, 0, 1, 0}, {3, 2, 7, 2}} {
		for c := range 40 {
			got := m.counts(c)
			if got.Total() != c || got.Delete != got.Create || min(got.Update, got.Delete, got.Recreate) < 0 {
				t.Errorf("mix %v, %d changes: %+v", m, c, got)
			}
		}
	}
}

func TestPodSetPlan(t *testing.T) {
	s := newPodSet(100)
	rng := rand.New(rand.NewPCG(1, 2))
	gone := map[int]bool{}
	for round := range 20 {
		want := changeCounts{Update: 10, Delete: 5, Recreate: 5, Create: 5}
		before := slices.Clone(s.live)
		p, err := s.plan(want, rng)
		if err != nil {
			t.Fatal(err)
		}
		if p.counts() != want {
			t.Fatalf("round %d: planned %+v, want %+v", round, p.counts(), want)
		}
		touched := slices.Concat(p.update, p.delete, p.recreate)
		seen := map[int]bool{}
		for _, i := range touched {
			if seen[i] || !slices.Contains(before, i) {
				t.Fatalf("round %d: Pod %d picked twice or not live", round, i)
			}
			seen[i] = true
		}
		for _, i := range p.delete {
			gone[i] = true
		}
		for _, i := range p.create {
			if slices.Contains(before, i) || gone[i] {
				t.Fatalf("round %d: created Pod %d existed or existed before", round, i)
			}
		}
		if s.len() != 100 || len(s.pos) != 100 {
			t.Fatalf("round %d: %d live (%d indexed), want 100", round, s.len(), len(s.pos))
		}
		for k, i := range s.live {
			if gone[i] || s.pos[i] != k {
				t.Fatalf("round %d: live Pod %d deleted before, or misindexed", round, i)
			}
		}
		for _, i := range slices.Concat(p.update, p.recreate, p.create) {
			if _, ok := s.pos[i]; !ok {
				t.Fatalf("round %d: Pod %d updated, recreated or created is not live", round, i)
			}
		}
	}
	if _, err := s.plan(changeCounts{Update: 90, Delete: 11}, rng); err == nil {
		t.Error("planned to touch 101 of 100 Pods")
	}
}

// recoverMedians is a point's medians as a run would give them.
func recoverMedians() map[string]map[string]float64 {
	return map[string]map[string]float64{
		vBoltRecover:       {mInformerSynced: 1.0, mSync: 1.5, mBodyMiB: 120, mWireMiB: 30, mAPICPU: 0.5},
		vBoltRecoverFull:   {mInformerSynced: 6.0, mSync: 2, mBodyMiB: 200, mWireMiB: 40, mAPICPU: 2.2},
		vBolt410:           {mInformerSynced: 8.0, mSync: 8, mBodyMiB: 200, mWireMiB: 40, mAPICPU: 2.2},
		vClientGoProto:     {mInformerSynced: 5.0, mSync: 5.2, mBodyMiB: 201, mWireMiB: 201, mAPICPU: 3},
		vClientGoProtoList: {mInformerSynced: 4.0, mSync: 6.0, mBodyMiB: 200, mWireMiB: 50, mAPICPU: 2},
	}
}

func TestRecoverHeadline(t *testing.T) {
	h := headline(recoverMedians())
	for name, want := range map[string]float64{
		hBestSynced:      4.0,       // LIST synced sooner
		hBestHandlers:    5.2,       // watch-list's handlers were done sooner
		hRecoverSynced:   1.0 / 4.0, // over the faster mode's synced
		hRecoverHandlers: 1.5 / 5.2,
		hRecoverBytes:    120.0 / 200, // over client-go's LIST, as encoded
		hRecoverWire:     30.0 / 50,
		hRecoverAPICPU:   0.5 / 2,
		hFallbackSynced:  6.0 / 4.0,
		hRelistSynced:    8.0 / 4.0,
	} {
		if got, ok := h[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}

	// Without client-go's LIST, a full list is the fallback's; without
	// client-go, nothing is "× client-go".
	med := recoverMedians()
	delete(med, vClientGoProtoList)
	if got := headline(med)[hRecoverBytes]; got != 120.0/200 {
		t.Errorf("bytes over the fallback's full list = %v, want 0.6", got)
	}
	delete(med, vClientGoProto)
	h = headline(med)
	for _, name := range []string{hRecoverSynced, hRecoverHandlers, hFallbackSynced, hRelistSynced, hBestSynced} {
		if _, ok := h[name]; ok {
			t.Errorf("%s present without client-go", name)
		}
	}
}

func TestRecoverTargets(t *testing.T) {
	met := &recoverPoint{Label: "1%", Changes: changeCounts{Update: 1000}, Headline: headline(recoverMedians())}
	missed := &recoverPoint{Label: "10%", Changes: changeCounts{Update: 10000}, Headline: map[string]float64{hRecoverSynced: 0.5}}
	res := &recoverResult{Mode: modeChanged, Points: []*recoverPoint{met, missed}}
	var got []string
	for _, tg := range recoverTargets(res) {
		got = append(got, tg.Status)
	}
	// At 1%: synced 0.25× holds, bytes 0.6× holds, the fallback 1.5×
	// misses; at 10%: synced 0.5× misses, the rest was not measured.
	if want := []string{"holds", "holds", "missed", "missed", "not measured", "not measured"}; !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	res.Mode = modeDowntime
	got = got[:0]
	for _, tg := range recoverTargets(res) {
		got = append(got, tg.Status)
	}
	if want := []string{"holds", "holds"}; !slices.Equal(got, want) {
		t.Errorf("downtime statuses %v, want %v (synced ≤ 1.0× client-go)", got, want)
	}
}

func TestDowntimeLabel(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", 20 * time.Second: "20s", 60 * time.Second: "1m", 90 * time.Second: "1m30s",
		30 * time.Minute: "30m", time.Hour: "1h", 75 * time.Second: "1m15s",
	} {
		if got := downtimeLabel(d); got != want {
			t.Errorf("downtimeLabel(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRecoverOptions(t *testing.T) {
	parse := func(args ...string) *recoverOptions {
		t.Helper()
		o := &recoverOptions{}
		if err := o.parse(args, io.Discard); err != nil {
			t.Fatalf("parse(%q): %v", args, err)
		}
		return o
	}
	o := parse("--pods", "3k")
	if o.Pods != 3000 || len(o.changed) != 3 || o.downtimes != nil {
		t.Errorf("defaults: %d Pods, %d amounts, downtimes %v; want 3000, the three of %s, none", o.Pods, len(o.changed), o.downtimes, defaultChanged)
	}
	if !slices.Equal(o.variantsFor(false), recoverVariants) {
		t.Errorf("changed-mode variants %v, want all", o.variantsFor(false))
	}
	o = parse("--downtimes", "2m,0,20s")
	if o.changed != nil || !slices.Equal(o.downtimes, []time.Duration{0, 20 * time.Second, 2 * time.Minute}) {
		t.Errorf("--downtimes alone: changed %v, downtimes %v", o.changed, o.downtimes)
	}
	if vs := o.variantsFor(true); slices.Contains(vs, vBolt410) || !slices.Contains(vs, vBoltRecover) {
		t.Errorf("downtime-mode variants %v: want boltinformer with Recovery and client-go, not the fallback", vs)
	}
	o = parse("--downtimes", "0,5m", "--changed", "1%", "--variants", "bolt-410,client-go-protobuf-list")
	if len(o.changed) != 1 || len(o.downtimes) != 2 || !slices.Equal(o.variantsFor(true), []string{vBolt410, vClientGoProtoList}) {
		t.Errorf("both modes with --variants: %v, %v, %v", o.changed, o.downtimes, o.variantsFor(true))
	}
	for _, bad := range [][]string{{"--variants", "bolt-warm"}, {"--downtimes", "-1s"}, {"--reps", "0"}, {"extra"}} {
		if err := (&recoverOptions{}).parse(bad, io.Discard); err == nil {
			t.Errorf("parse(%q) succeeded, want an error", bad)
		}
	}
}

// TestDowntimePlot: one marker per measured value, and the end of the watch
// history marked once, between the last point that resumed and the first
// that did not.
func TestDowntimePlot(t *testing.T) {
	point := func(label string, expired bool, synced float64) *recoverPoint {
		return &recoverPoint{Label: label, Expired: expired, Medians: map[string]map[string]float64{
			vBoltRecover:       {mInformerSynced: synced, mSync: synced + 1},
			vClientGoProtoList: {mInformerSynced: 5},
		}}
	}
	r := &recoverResult{Mode: modeDowntime, runHeader: runHeader{Pods: 100000, Reps: 1, Date: "2026-11-26T00:00:00Z"}, Rate: 20, WindowSeconds: 75,
		Points: []*recoverPoint{point("0", false, 1), point("1m", false, 1.2), point("2m", true, 2), point("30m", true, 3)}}
	p := r.downtimePlot()
	svg := p.SVG()
	if n := strings.Count(svg, "<circle"); n != 12 {
		t.Errorf("%d markers, want 12 (3 series with values at 4 points)", n)
	}
	if n := strings.Count(svg, ">← watch history 1m15s<"); n != 1 {
		t.Errorf("the watch history's end marked %d times, want once", n)
	}
	for _, label := range []string{">0<", ">1m<", ">2m<", ">30m<"} {
		if !strings.Contains(svg, label) {
			t.Errorf("no axis label %s", label)
		}
	}
}

// TestRecoveryMetrics: a recovery's figures reach the metrics, among them
// the wait between the failed watch (the 410) and the metadata list, and
// the observer keeps the first failed watch and the last recovery.
func TestRecoveryMetrics(t *testing.T) {
	start := time.Now()
	o := newObserver()
	o.WatchEnded(nil) // a watch that timed out normally is no failure
	if got := o.firstWatchError(start); got != 0 {
		t.Errorf("first watch error after a normal end: %v, want 0", got)
	}
	o.WatchEnded(errors.New("too old resource version"))
	first := o.watchFailed
	o.WatchEnded(errors.New("again"))
	if o.watchFailed != first {
		t.Error("a later failed watch replaced the first")
	}
	if o.recovery(start) != nil {
		t.Error("a recovery reported before any ended")
	}
	o.Recovered(reflector.CauseRelistExpired, "10", recovery.Stats{Listed: 5, Unchanged: 3, Deleted: 1, Fetch: 2, Fetched: 2, Requests: 2, Duration: time.Second})
	o.Recovered(reflector.CauseRelistExpired, "12", recovery.Stats{Listed: 5, Unchanged: 5, Duration: time.Second})
	if rec := o.recovery(start); rec == nil || rec.Count != 2 || rec.Unchanged != 5 || rec.DurationSeconds != 1 {
		t.Errorf("recovery = %+v, want the second of 2", rec)
	}
	select {
	case <-o.recovered:
	default:
		t.Error("Recovered did not signal")
	}

	res := &childResult{
		InformerSyncedSeconds: 3, HandlerSyncedSeconds: []float64{3}, WatchErrorSeconds: 0.25,
		Cost:     startCost{MetaLists: 2, Fetches: 3, MetaBodyBytes: 3 << 20, FetchBodyBytes: 1 << 20, ClientCPUs: 0.5},
		Recovery: &recoveryResult{Seconds: 2.5, DurationSeconds: 0.75, Fetched: 3, Requests: 3},
	}
	m := res.metrics()
	for k, want := range map[string]float64{
		mRecAfterWatchError: 1.5, mRecovered: 2.5, mRecFetched: 3, mStartMetaLists: 2, mStartFetches: 3,
		mMetaMiB: 3, mFetchMiB: 1, mClientCPU: 0.5,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
}
