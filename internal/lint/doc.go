// Package lint holds tests that enforce the code's shape: the import
// direction between cairn's packages (../shared/reference/style.md section
// 5.2) and that the product imports no nats-server package but its
// configuration parser, and that only from internal/config. It has no
// non-test code.
package lint
