package benchkit

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRequestsCountsKindsApart: a catching-up warm start's consistent read
// (limit=1 at resourceVersion "") is not a full LIST, nor is a recovery's
// metadata list (its Accept header) or its fetches (a list in one
// namespace); every other GET without watch is, whatever its limit.
func TestRequestsCountsKindsApart(t *testing.T) {
	c := &Requests{Resource: "pods"}
	rt := c.Wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}))
	get := func(u, accept string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "https://apiserver"+u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	for _, u := range []string{
		"/api/v1/pods?limit=1&resourceVersion=",      // probe
		"/api/v1/pods?limit=1",                       // probe: no resourceVersion is ""
		"/api/v1/pods?limit=500",                     // a page of a full list
		"/api/v1/pods?limit=1&resourceVersion=12345", // not consistent: a list at a version
		"/api/v1/pods?resourceVersion=0",             // a list from the watch cache
		"/api/v1/pods?watch=true&resourceVersion=12&timeoutSeconds=3",
		"/api/v1/pods?watch=1&sendInitialEvents=true",
		"/api/v1/namespaces/kube-system", // not Pods
	} {
		get(u, "")
	}
	// A recovery: two pages of metadata, then a fetch of one object and of
	// a namespace.
	get("/api/v1/pods?limit=500&resourceVersion=12&resourceVersionMatch=NotOlderThan", metadataListAcceptHeader)
	get("/api/v1/pods?limit=500&continue=abc", metadataListAcceptHeader)
	get("/api/v1/namespaces/bench-01/pods?fieldSelector=metadata.name%3Dp-1&resourceVersion=14&resourceVersionMatch=NotOlderThan", "")
	get("/api/v1/namespaces/bench-02/pods?resourceVersion=14&resourceVersionMatch=NotOlderThan", "")
	got := [6]int64{c.Count(List), c.Count(Probe), c.Count(Watch), c.Count(WatchList), c.Count(MetaList), c.Count(Fetch)}
	if got != [6]int64{3, 2, 1, 1, 2, 2} {
		t.Errorf("lists, probes, watches, watch-lists, metadata lists, fetches = %v, want [3 2 1 1 2 2]", got)
	}
	if c.ResourceBytes() != 2*11 || c.TotalBytes() != 2*12 || c.Bytes(MetaList) != 4 {
		t.Errorf("bytes: pods %d, total %d, metadata %d; want 22, 24, 4", c.ResourceBytes(), c.TotalBytes(), c.Bytes(MetaList))
	}
}

// metadataListAcceptHeader is the Accept header of client-go v0.37.2's
// metadata client's List (k8s.io/client-go/metadata, metadata.go).
const metadataListAcceptHeader = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

func TestParseProcIO(t *testing.T) {
	io := []byte("rchar: 6976\nwchar: 1234\nsyscr: 10\nsyscw: 3\nread_bytes: 4096\nwrite_bytes: 81920\ncancelled_write_bytes: 0\n")
	if w, wb, err := ParseProcIO(io); err != nil || w != 1234 || wb != 81920 {
		t.Errorf("ParseProcIO = %d, %d, %v; want 1234, 81920", w, wb, err)
	}
	if _, _, err := ParseProcIO([]byte("rchar: 1\n")); err == nil {
		t.Error("ParseProcIO accepted a file without wchar")
	}
}

func TestReadProcOfThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if s, err := ReadProc(os.Getpid()); err != nil || s.RssAnon == 0 {
		t.Errorf("ReadProc = %+v, %v; want RssAnon > 0", s, err)
	}
}

// The /proc parsing is runstats'; this is the meter's bookkeeping: a
// readable process is measured, an unreadable one is -1.
func TestCPUMeterMarksUnknownProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	m := StartCPUMeter(os.Getpid(), 0)
	if used := m.Used(); used[0] < 0 || used[1] != -1 {
		t.Errorf("Used = %v, want [≥ 0, -1]", used)
	}
	m.start[0] += 1e6 // as if the process had restarted: its counter went down
	if used := m.Used(); used[0] != -1 {
		t.Errorf("CPU of a process whose counter went down = %v, want -1", used[0])
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0.7: 1, 3: 5, 7.2: 10, 12: 20, 100000: 100000, 100001: 200000} {
		if got := NiceCeil(in); got != want {
			t.Errorf("NiceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestRotateAlternatesTwo(t *testing.T) {
	if a, b := Rotate([]string{"x", "y"}, 0), Rotate([]string{"x", "y"}, 1); a[0] != "x" || b[0] != "y" || b[1] != "x" {
		t.Errorf("Rotate = %v, %v", a, b)
	}
}

func TestGroupByKeepsFirstSeenOrder(t *testing.T) {
	order, by := GroupBy([]int{3, 1, 4, 1, 5, 9, 2, 6}, func(x int) bool { return x%2 == 0 })
	if len(order) != 2 || order[0] || len(by[false]) != 5 || by[true][0] != 4 || by[true][2] != 6 {
		t.Errorf("GroupBy = %v, %v", order, by)
	}
}

// TestSaveRenders: a saved result renders again to the same text, and a
// plot with a line draws one.
func TestSaveRenders(t *testing.T) {
	rep := &Report{Plots: []Plot{{Name: "p", Series: []Series{{Name: "s", Points: [][2]float64{{0, 1}, {5, 2}}}}}}}
	rep.Printf("title\n")
	tab := rep.Table("a", "bb")
	tab.Row("1", "2")
	dir := t.TempDir()
	if _, err := Save(dir, "r", map[string]int{"x": 1}, rep); err != nil {
		t.Fatal(err)
	}
	res, err := Load(dir + "/r.json")
	if err != nil {
		t.Fatal(err)
	}
	var a, b strings.Builder
	_ = rep.WriteText(&a)
	_ = res.Report.WriteText(&b)
	if a.String() != b.String() || !strings.Contains(a.String(), "a  bb") || !strings.Contains(string(res.Raw), `"x": 1`) {
		t.Errorf("rendered %q, again %q, raw %s", a.String(), b.String(), res.Raw)
	}
	if svg, err := os.ReadFile(dir + "/p.svg"); err != nil || !strings.Contains(string(svg), "<polyline") {
		t.Errorf("p.svg: %v, no line", err)
	}
}
