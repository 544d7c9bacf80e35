package clusterid

import (
	"context"
	"fmt"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Kind says what an identity was read from.
type Kind string

const (
	// KindKubeSystem is the kube-system namespace's UID.
	KindKubeSystem Kind = "kube-system"
	// KindServiceAccount is the UID of the ServiceAccount the client
	// authenticates as, used when reading kube-system is Forbidden.
	KindServiceAccount Kind = "serviceaccount"
)

// serviceAccountPrefix starts every ServiceAccount's user name
// (k8s.io/apiserver/pkg/authentication/serviceaccount, v0.37.2).
const serviceAccountPrefix = "system:serviceaccount:"

// Reader reads what an identity is made of, through one client.
type Reader interface {
	// KubeSystemUID returns the UID of the kube-system namespace.
	KubeSystemUID(ctx context.Context) (string, error)
	// Self returns the user the client authenticates as, from a
	// SelfSubjectReview.
	Self(ctx context.Context) (authenticationv1.UserInfo, error)
}

// Options configures a Source. The zero value records the kube-system kind
// as the bare UID, as the factories always have.
type Options struct {
	// Component starts errors and the log line, e.g. "boltinformer factory".
	Component string
	// Declare names how the caller's user declares an identity instead, for
	// errors, e.g. "factory.PersistenceOptions.ClusterIdentity".
	Declare string
	// KubeSystemPrefix is put before the kube-system UID in the recorded
	// identity: "" for the factories, "kube-system/" for the
	// controller-runtime adapter, each as recorded before other kinds
	// existed (so existing files resume). The ServiceAccount kind is
	// recorded as "serviceaccount/<namespace>/<name>/<uid>" by both; a UID
	// never contains "/", so the kinds never record the same value.
	KubeSystemPrefix string
}

// Source learns a cluster's identity through a Reader once, and logs which
// kind it found once. Failures are not remembered: the next Get asks again.
// It is safe for concurrent use.
type Source struct {
	read Reader
	opts Options

	mu sync.Mutex // held across a read, so concurrent Gets ask once
	id string     // guarded by mu; "" until known
}

// New returns a Source reading through r.
func New(r Reader, opts Options) *Source {
	return &Source{read: r, opts: opts}
}

// Get returns the identity to record, reading it unless it is known; it is
// a cache.ClusterIdentity.
func (s *Source) Get(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != "" {
		return s.id, nil
	}
	id, err := s.learn(ctx)
	if err != nil {
		return "", err
	}
	s.id = id
	return id, nil
}

// learn reads the identity and logs which kind it is.
func (s *Source) learn(ctx context.Context) (string, error) {
	logger := klog.FromContext(ctx)
	uid, err := s.read.KubeSystemUID(ctx)
	switch {
	case err == nil && uid == "":
		return "", fmt.Errorf("%s: cluster identity: namespace %s has no UID; declare the cluster's identity with %s", s.opts.Component, metav1.NamespaceSystem, s.opts.Declare)
	case err == nil:
		id := s.opts.KubeSystemPrefix + uid
		logger.Info("Cache file's cluster identity is the kube-system namespace's UID", "component", s.opts.Component, "kind", KindKubeSystem, "identity", id)
		return id, nil
	case !apierrors.IsForbidden(err):
		// Unreachable, timed out, unauthorized...: retried, never a
		// reason to pick another kind.
		return "", fmt.Errorf("%s: cluster identity: reading namespace %s: %w (retried; nothing stored is resumed until it succeeds, or declare the cluster's identity with %s)", s.opts.Component, metav1.NamespaceSystem, err, s.opts.Declare)
	}
	forbidden := err
	user, err := s.read.Self(ctx)
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return "", fmt.Errorf("%s: cluster identity: this client may not read namespace %s (%v), nor review itself to name its ServiceAccount (%w): %w; declare the cluster's identity with %s", s.opts.Component, metav1.NamespaceSystem, forbidden, err, ErrUnidentified, s.opts.Declare)
	case err != nil:
		return "", fmt.Errorf("%s: cluster identity: this client may not read namespace %s; reviewing itself to name its ServiceAccount: %w (retried; nothing stored is resumed until it succeeds, or declare the cluster's identity with %s)", s.opts.Component, metav1.NamespaceSystem, err, s.opts.Declare)
	}
	nsName, isSA := strings.CutPrefix(user.Username, serviceAccountPrefix)
	if !isSA || user.UID == "" || strings.Contains(user.UID, "/") {
		return "", fmt.Errorf("%s: cluster identity: this client may not read namespace %s (%v), and user %q (UID %q) is not a ServiceAccount, whose UID would identify the cluster: %w; declare the cluster's identity with %s", s.opts.Component, metav1.NamespaceSystem, forbidden, user.Username, user.UID, ErrUnidentified, s.opts.Declare)
	}
	ns, name, _ := strings.Cut(nsName, ":")
	id := fmt.Sprintf("%s/%s/%s/%s", KindServiceAccount, ns, name, user.UID)
	logger.Info("This client may not read the kube-system namespace; the cache file's cluster identity is its ServiceAccount's UID",
		"component", s.opts.Component, "kind", KindServiceAccount, "identity", id, "reason", forbidden.Error())
	return id, nil
}
