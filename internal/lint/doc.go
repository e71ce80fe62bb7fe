// Package lint holds tests that enforce the code's shape: the import
// direction between cairn's packages (the allow-list of lint_test.go:
// lower levels never import higher ones; docs/engine.md, "Layout", for
// the JetStream packages), that the product imports no nats-server
// package but its configuration parser, and that only from
// internal/config, and that the state machines that apply operations
// read no clock and no random source (apply_test.go), and that every
// citation in the repository's text is one a reader can open: no file
// cites the design notes kept outside the repository (cite_test.go;
// docs/architecture.md rule 8). It has no non-test code.
package lint
