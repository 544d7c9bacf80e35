// Package clusterid learns the identity of the cluster a client reaches: the
// value the factories and the controller-runtime adapter record with every
// collection (cache.Persistence.Cluster), so that a cache file is resumed
// only against the cluster that wrote it.
//
// # Basics
//
// An identity must differ between any two clusters and change when a
// cluster is recreated; a collection recorded under another identity starts
// cold. Source learns it once, in this order:
//
//  1. KindKubeSystem: the UID of the kube-system namespace. The apiserver
//     creates the namespace and never deletes it, and its UID is a random
//     UUID minted when the cluster's storage was first written.
//  2. KindServiceAccount, only when reading kube-system is Forbidden (a
//     controller with namespaced RBAC): the UID of the ServiceAccount the
//     client authenticates as, from a SelfSubjectReview. Every
//     authenticated user may create one (ClusterRole system:basic-user,
//     bound to system:authenticated by the apiserver's default policy). The
//     apiserver accepts a ServiceAccount token only while the named
//     ServiceAccount exists in its own storage with the UID the token
//     claims, so the UID is, like kube-system's, a random UUID minted by
//     this cluster. It changes, and the next start is cold, when the
//     ServiceAccount is recreated.
//
// Any other failure — the apiserver unreachable, a timeout, a 5xx, a 401 —
// is returned: the informer retries with backoff and resumes nothing until
// an identity is known. A client that may not read kube-system and is not
// a ServiceAccount gets an error naming how to declare the identity.
//
// # Why not something else
//
// On kube-apiserver v1.37 with RBAC and its default policy, an authenticated
// user with no other grant may read the discovery documents, /version,
// /openapi, the health endpoints (system:discovery,
// system:public-info-viewer) and create self reviews (system:basic-user);
// ServiceAccounts may also read the issuer's /openid/v1/jwks
// (system:service-account-issuer-discovery). None of the documents names
// the cluster: /api's serverAddressByClientCIDRs is only the address.
// kube-public/cluster-info exists only on kubeadm clusters (a bare
// apiserver has none) and holds the CA and address; the kube-root-ca.crt
// ConfigMap needs kube-controller-manager and a grant on ConfigMaps. The
// server address alone is reused (two test clusters on one loopback port;
// a DNS name moved from a blue to a green cluster), and a CA bundle may be
// shared by several clusters (an organisation's CA, public roots). A user
// UID from another authenticator (a static token file, OIDC, a webhook) is
// assigned outside the cluster and is the same on every cluster the user
// reaches: the test apiserver's admin token has UID "admin". The signing
// keys published in the JWKS are shared by clusters configured with one
// key. Hence the ServiceAccount's UID and nothing else.
//
// # Caveats
//
// Two clusters restored from one etcd backup share every UID, so both kinds
// of identity; declare an identity for such clones. A client impersonating a
// ServiceAccount supplies the UID itself (Impersonate-Uid).
//
// The kind of identity is part of the recorded value, and KindKubeSystem's
// form is what each caller recorded before other kinds existed, so files
// written then still resume. A file written under one kind never resumes
// under the other: when a controller gains or loses the right to read
// kube-system its next start is cold.
package clusterid
