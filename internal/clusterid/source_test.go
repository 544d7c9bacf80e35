package clusterid

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeReader answers from its fields and counts the calls.
type fakeReader struct {
	uid     string
	uidErr  error
	user    authenticationv1.UserInfo
	selfErr error

	uidCalls, selfCalls int
}

func (r *fakeReader) KubeSystemUID(context.Context) (string, error) {
	r.uidCalls++
	return r.uid, r.uidErr
}

func (r *fakeReader) Self(context.Context) (authenticationv1.UserInfo, error) {
	r.selfCalls++
	return r.user, r.selfErr
}

var (
	forbidden      = apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", errors.New("namespaced RBAC"))
	errUnreachable = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	saUser         = authenticationv1.UserInfo{
		Username: "system:serviceaccount:team:ctrl",
		UID:      "1da144c4-622d-4a4a-a999-0006d551cb19",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"},
	}
)

// The identity's kind follows from what the client may read: kube-system's
// UID when it may, the ServiceAccount's UID only when that read is
// Forbidden, and an error — never another kind — when the apiserver does
// not answer or the user is not a ServiceAccount.
func TestSourceKinds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reader     fakeReader
		prefix     string
		want       string
		wantErr    string // substring; "" for none
		unidentify bool   // errors.Is(err, ErrUnidentified)
		wantSelf   int    // SelfSubjectReviews made
	}{
		{name: "kube-system", reader: fakeReader{uid: "ks-uid", user: saUser}, want: "ks-uid"},
		{name: "kube-system, prefixed", reader: fakeReader{uid: "ks-uid"}, prefix: "kube-system/", want: "kube-system/ks-uid"},
		{name: "forbidden, a ServiceAccount", reader: fakeReader{uidErr: forbidden, user: saUser}, prefix: "kube-system/",
			want: "serviceaccount/team/ctrl/1da144c4-622d-4a4a-a999-0006d551cb19", wantSelf: 1},
		{name: "unreachable", reader: fakeReader{uidErr: errUnreachable, user: saUser}, wantErr: "connection refused"},
		{name: "not found", reader: fakeReader{uidErr: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "kube-system"), user: saUser}, wantErr: "not found"},
		{name: "no UID", reader: fakeReader{}, wantErr: "has no UID"},
		{name: "forbidden, a user from a token file", reader: fakeReader{uidErr: forbidden, user: authenticationv1.UserInfo{Username: "admin", UID: "admin"}},
			wantErr: `user "admin" (UID "admin") is not a ServiceAccount`, unidentify: true, wantSelf: 1},
		{name: "forbidden, a ServiceAccount without UID", reader: fakeReader{uidErr: forbidden, user: authenticationv1.UserInfo{Username: saUser.Username}},
			wantErr: "is not a ServiceAccount", unidentify: true, wantSelf: 1},
		{name: "forbidden, self review forbidden", reader: fakeReader{uidErr: forbidden, selfErr: apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}, "", errors.New("no basic-user"))},
			wantErr: "nor review itself", unidentify: true, wantSelf: 1},
		{name: "forbidden, then unreachable", reader: fakeReader{uidErr: forbidden, selfErr: errUnreachable}, wantErr: "connection refused", wantSelf: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.reader
			s := New(&r, Options{Component: "test", Declare: "WithClusterIdentity", KubeSystemPrefix: tc.prefix})
			got, err := s.Get(context.Background())
			switch {
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Errorf("Get = %q, %v; want %q", got, err, tc.want)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Get = %q, %v; want an error containing %q", got, err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), "WithClusterIdentity"):
				t.Errorf("error %q does not say how to declare the identity", err)
			}
			if errors.Is(err, ErrUnidentified) != tc.unidentify {
				t.Errorf("errors.Is(%v, ErrUnidentified) = %v, want %v", err, !tc.unidentify, tc.unidentify)
			}
			if r.selfCalls != tc.wantSelf {
				t.Errorf("%d SelfSubjectReviews, want %d", r.selfCalls, tc.wantSelf)
			}
		})
	}
}

// An error is not remembered; an identity is, so the kind never changes
// within a Source.
func TestSourceRemembersOnlySuccess(t *testing.T) {
	r := &fakeReader{uidErr: errUnreachable, user: saUser}
	s := New(r, Options{})
	ctx := context.Background()
	if _, err := s.Get(ctx); err == nil {
		t.Fatal("Get succeeded with the apiserver errUnreachable")
	}
	r.uidErr = forbidden
	first, err := s.Get(ctx)
	if err != nil || !strings.HasPrefix(first, "serviceaccount/") {
		t.Fatalf("Get = %q, %v; want the ServiceAccount's identity", first, err)
	}
	r.uidErr, r.uid = nil, "ks-uid" // granted later: the Source keeps its kind
	if again, err := s.Get(ctx); err != nil || again != first {
		t.Errorf("Get = %q, %v; want the remembered %q", again, err, first)
	}
	if r.uidCalls != 2 || r.selfCalls != 1 {
		t.Errorf("%d kube-system reads and %d self reviews, want 2 and 1", r.uidCalls, r.selfCalls)
	}
}
