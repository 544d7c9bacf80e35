// Command inspect reads a boltinformer cache file offline — a controller's
// file after a crash, a copy attached to a bug report, a hot snapshot — and
// answers like kubectl would, without a cluster.
//
// # Basics
//
// Commands: ls (collections), get (objects, through kubectl's printers from
// k8s.io/cli-runtime: tables, YAML/JSON, name, jsonpath and go-template),
// index (secondary indexes), stats (file and bucket statistics), verify
// (consistency), export (YAML files or one List) and diff (two snapshots, as
// unified diffs of the changed objects' YAML). Every command opens the file
// read-only (through persist/inspectfile) and never modifies it.
//
// Exit codes: 0 on success; 1 on an error, or when verify finds a problem;
// diff exits 1 when the files differ and 2 on an error, like diff(1) and
// kubectl diff.
//
// # Caveats
//
// A file that a running process holds for writing cannot be opened (bbolt
// locks it); inspect gives up after --lock-timeout and says how to take a
// hot snapshot with persist.DB.SnapshotFile instead.
//
// Secret data is redacted in every output unless --show-secrets is given.
//
// verify checks the file against itself: bbolt's page structure, that every
// record decodes, and that each index's value→key and key→values buckets
// agree with each other and with the stored objects. Index functions are
// code, so it cannot tell whether an index still matches its function.
package main
