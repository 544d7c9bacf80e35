package e2e

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// auditPolicy records every request but the noisy ones no test counts
// (Leases, Events), at the Metadata level, once complete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  - group: ""
    resources: ["events"]
  - group: events.k8s.io
    resources: ["events"]
- level: Metadata
`

// auditArgs writes the policy into dir and returns the kube-apiserver flags
// that log to dir/audit.log, synchronously (so the file holds every
// completed request once it has been answered).
func auditArgs(t testing.TB, dir string) (args []string, logPath string) {
	t.Helper()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
	}, logPath
}

// auditEvent is the part of an audit.k8s.io/v1 Event the tests read.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// groupResource is "resource" or "resource.group", as kubectl writes it.
func (e auditEvent) groupResource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.APIGroup == "" {
		return e.ObjectRef.Resource
	}
	return e.ObjectRef.Resource + "." + e.ObjectRef.APIGroup
}

// query is the request's query parameters.
func (e auditEvent) query() url.Values {
	u, err := url.ParseRequestURI(e.RequestURI)
	if err != nil {
		return nil
	}
	return u.Query()
}

// informerList says whether e is a LIST an informer makes to fill its
// cache: across all namespaces (a namespaced LIST is a controller reading
// one namespace, as the namespace controller does when it empties one), and
// neither the limit=1 consistent read with which a resumed informer learns
// how far it must catch up (reflector.CatchUp) nor the consistent metadata
// list by which a small warm collection proves it caught up
// (recovery.ListVersions: resourceVersion "", pages of 10,000 through the
// factories' listers; the audit log does not record the Accept header
// that asks for metadata).
func (e auditEvent) informerList() bool {
	if e.Verb != "list" || e.ObjectRef == nil || e.ObjectRef.Namespace != "" {
		return false
	}
	q := e.query()
	proof := q.Get("limit") == "10000" && q.Get("resourceVersion") == ""
	return q.Get("limit") != "1" && !proof
}

// readAudit returns the events of the audit log at path made by clients
// whose user agent starts with agent (every client if agent is "") and
// received at or after since.
func readAudit(t testing.TB, path, agent string, since time.Time) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log %s: %v", path, err)
		}
		if strings.HasPrefix(e.UserAgent, agent) && !e.RequestReceived.Before(since) {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
